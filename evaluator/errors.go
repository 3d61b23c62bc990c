package evaluator

import (
	"errors"
	"strconv"
)

// Sentinel errors. Every error the parsers return wraps one of them, so
// callers can tell them apart with errors.Is.
var (
	// ErrInvalidJSON: the input is not one valid JSON text (RFC 8259) as
	// the evaluator reads it: valid UTF-8, no lone surrogate in a \u escape,
	// numbers within float64 range, nesting at most MaxDepth.
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrNotObject: the input is valid JSON but not the object expected.
	ErrNotObject = errors.New("not a JSON object")
	// ErrNotCase: the line is a JSON object without a "flag" object, or
	// with "facts" that are neither an object nor null.
	ErrNotCase = errors.New("not an evaluation case")
	// ErrDocumentVersion: the document's "v" is not 1; keep the previous one.
	ErrDocumentVersion = errors.New("unsupported document version")
	// ErrDocument: the envelope has a member of the wrong type.
	ErrDocument = errors.New("malformed document envelope")
)

// MaxDepth is the deepest nesting of lists and objects the reader accepts;
// the outermost value is at depth 1. Deeper input is ErrInvalidJSON.
const MaxDepth = 128

// ParseError says what could not be parsed and why. Offset is the byte
// offset in the input where the problem was found, or -1 when the problem
// is not tied to one place.
type ParseError struct {
	What   string // "flag", "facts", "case" or "document"
	Offset int
	Detail string
	Err    error // one of the sentinel errors above
}

func (e *ParseError) Error() string {
	msg := "cannot parse " + e.What + ": " + e.Err.Error()
	if e.Offset >= 0 {
		msg += " at byte " + strconv.Itoa(e.Offset)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *ParseError) Unwrap() error { return e.Err }
