package storage

import (
	"fmt"
	"strings"
)

// Limits of keys, the smaller of what S3 and common local file systems
// accept.
const (
	// MaxKeyLen is the longest key in bytes (S3's limit).
	MaxKeyLen = 1024
	// MaxSegmentLen is the longest '/'-separated segment in bytes (NAME_MAX
	// of Linux file systems).
	MaxSegmentLen = 255
)

// ValidateKey reports whether key may name an object: 1 to MaxKeyLen bytes
// of ASCII letters, digits and "-_.=+,@~:!", in segments separated by
// single '/'; no leading or trailing '/', no empty segment, no "." or ".."
// segment, no segment over MaxSegmentLen bytes. The same rules hold for
// every backend, so a key that works on the local directory works on S3.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key %.40q... is %d bytes, over the limit of %d", ErrInvalidKey, key, len(key), MaxKeyLen)
	}
	return validateSegments(key, false)
}

// ValidatePrefix reports whether prefix may be a listing prefix: empty, or
// whole segments as in ValidateKey optionally ending in '/' or followed by
// the start of a segment.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxKeyLen {
		return fmt.Errorf("%w: prefix %.40q... is %d bytes, over the limit of %d", ErrInvalidKey, prefix, len(prefix), MaxKeyLen)
	}
	return validateSegments(prefix, true)
}

// validateSegments checks the segments of s. With partial, the last
// segment may be empty (s ends in '/') or any run of key characters.
func validateSegments(s string, partial bool) error {
	what := "key"
	if partial {
		what = "prefix"
	}
	for i := 0; i < len(s); i++ {
		if !keyChar(s[i]) && s[i] != '/' {
			return fmt.Errorf("%w: %s %q has the character %q at byte %d; use ASCII letters, digits and -_.=+,@~:! with / between segments", ErrInvalidKey, what, s, s[i], i)
		}
	}
	if s[0] == '/' {
		return fmt.Errorf("%w: %s %q starts with '/'", ErrInvalidKey, what, s)
	}
	rest := s
	for {
		seg, tail, more := strings.Cut(rest, "/")
		last := !more
		switch {
		case last && partial:
			if len(seg) > MaxSegmentLen {
				return fmt.Errorf("%w: %s %q has a segment of %d bytes, over the limit of %d", ErrInvalidKey, what, s, len(seg), MaxSegmentLen)
			}
			return nil
		case seg == "" && last:
			return fmt.Errorf("%w: %s %q ends with '/'", ErrInvalidKey, what, s)
		case seg == "":
			return fmt.Errorf("%w: %s %q has an empty segment (\"//\")", ErrInvalidKey, what, s)
		case seg == "." || seg == "..":
			return fmt.Errorf("%w: %s %q has a %q segment", ErrInvalidKey, what, s, seg)
		case len(seg) > MaxSegmentLen:
			return fmt.Errorf("%w: %s %q has a segment of %d bytes, over the limit of %d", ErrInvalidKey, what, s, len(seg), MaxSegmentLen)
		}
		if last {
			return nil
		}
		rest = tail
	}
}

func keyChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.=+,@~:!", c) >= 0
}
