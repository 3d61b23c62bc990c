package records

import (
	"crypto/rand"
	"fmt"
)

// UUID is a 16-byte UUID of any version. Its zero value is the nil UUID.
type UUID [16]byte

// ParseUUID reads the 36-character form `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`
// with hexadecimal digits of either case; any version and variant. It
// reports false for anything else (no braces, no `urn:uuid:` prefix, no
// 32-digit form).
func ParseUUID(s string) (UUID, bool) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; i += 2 {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return UUID{}, false
		}
		u[j] = hi<<4 | lo
		j++
	}
	return u, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// NewUUIDv4 returns a random (version 4) UUID: the one generator of batch
// ids (the Go client) and catalog transaction ids.
func NewUUIDv4() UUID {
	var u UUID
	_, _ = rand.Read(u[:]) // never fails (crypto/rand, Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// IsZero reports whether u is the nil UUID.
func (u UUID) IsZero() bool { return u == UUID{} }

// String formats u in lower case, 8-4-4-4-12.
func (u UUID) String() string {
	var b [36]byte
	u.appendTo(b[:0])
	return string(b[:])
}

func (u UUID) appendTo(b []byte) []byte {
	const digits = "0123456789abcdef"
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, digits[c>>4], digits[c&0x0f])
	}
	return b
}

// MarshalText writes the lower-case 8-4-4-4-12 form.
func (u UUID) MarshalText() ([]byte, error) { return u.appendTo(make([]byte, 0, 36)), nil }

// UnmarshalText reads the 8-4-4-4-12 form.
func (u *UUID) UnmarshalText(b []byte) error {
	v, ok := ParseUUID(string(b))
	if !ok {
		return fmt.Errorf("cannot read UUID %q: %w", b, ErrCorrupt)
	}
	*u = v
	return nil
}
