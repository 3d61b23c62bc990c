package evaluator

// This file fixes the package's public API, shared by the native callers
// (mf eval, the flag compiler, the Go client) and the WebAssembly guest.

// Level is the evaluator feature level; a flag whose need is above it fails
// with UNSUPPORTED.
const Level = 1

// Reason says why a result came out as it did.
type Reason uint8

const (
	ReasonError Reason = iota
	ReasonStatic
	ReasonTargetingMatch
	ReasonSplit
	ReasonDefault
	ReasonDisabled
)

// ErrorCode qualifies a ReasonError result.
type ErrorCode uint8

const (
	ErrorNone ErrorCode = iota
	ErrorUnsupported
	ErrorNotReady
	ErrorParse
)

// Result is the outcome of evaluating one flag for one set of facts.
// Rule is the 0-based index of the deciding rule, or -1 when absent.
// Value is the canonical JSON text of p[Variant], or nil when absent.
type Result struct {
	Variant   string
	Reason    Reason
	Rule      int
	Value     []byte
	ErrorCode ErrorCode
}
