package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
)

// Cursors seals list positions into opaque cursors bound to their list and
// to the parameters that shape it: a cursor is base64url(version ‖ position
// ‖ tag), tag = first 16 bytes of HMAC-SHA256(key, list ‖ params ‖
// position) (docs/reporting-api.md). A cursor from another list, another
// sort or filter, another installation, or an edited one fails to open.
type Cursors struct {
	key []byte
}

const (
	cursorVersion = 1
	cursorTagLen  = 16
	// cursorMaxLen bounds the cursor text read, so that a huge parameter
	// costs nothing.
	cursorMaxLen = 2048
)

// NewCursors returns a sealer with the given key (at least 16 bytes).
func NewCursors(key []byte) *Cursors { return &Cursors{key: slices.Clone(key)} }

// Params is the normalized form of the parameters a cursor is bound to:
// name=value pairs, sorted, so that the order in the query does not matter.
type Params []string

// Bind returns the normalized parameters from name/value pairs.
func Bind(pairs ...string) Params {
	p := make(Params, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		p = append(p, pairs[i]+"="+pairs[i+1])
	}
	slices.Sort(p)
	return p
}

func (c *Cursors) tag(list string, params Params, pos []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	var n [8]byte
	write := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		m.Write(n[:])
		m.Write(b)
	}
	write([]byte(list))
	write([]byte(strings.Join(params, "\x00")))
	write(pos)
	return m.Sum(nil)[:cursorTagLen]
}

// Seal makes the cursor for position pos of list with params.
func (c *Cursors) Seal(list string, params Params, pos []byte) string {
	b := make([]byte, 0, 1+len(pos)+cursorTagLen)
	b = append(b, cursorVersion)
	b = append(b, pos...)
	b = append(b, c.tag(list, params, pos)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Open returns the position sealed in cursor, or false when the cursor was
// not handed out by list with these params.
func (c *Cursors) Open(list string, params Params, cursor string) ([]byte, bool) {
	if len(cursor) > cursorMaxLen {
		return nil, false
	}
	// One cursor has one spelling (decodeCanonical).
	b, err := decodeCanonical(cursor)
	if err != nil || len(b) < 1+cursorTagLen || b[0] != cursorVersion {
		return nil, false
	}
	pos := b[1 : len(b)-cursorTagLen]
	if !hmac.Equal(b[len(b)-cursorTagLen:], c.tag(list, params, pos)) {
		return nil, false
	}
	return pos, true
}

// errNotCanonical refuses base64url text with a line break.
var errNotCanonical = errors.New("not the canonical spelling: a line break")

// decodeCanonical decodes unpadded base64url text that has one spelling
// only: Strict refuses unused low bits that are not zero, and the line
// breaks the decoder would otherwise skip are refused here (a cursor or
// token with a \r inside opened as the one without it).
func decodeCanonical(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errNotCanonical
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}
