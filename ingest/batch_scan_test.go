package ingest

import "testing"

// TestPlain8Exhaustive checks the SWAR test against every byte value at every
// position.
func TestPlain8Exhaustive(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			want := c >= 0x20 && c < 0x80 && c != '"' && c != '\\'
			if got := plain8(b, 0); got != want {
				t.Fatalf("byte %#x at %d: %v", c, pos, got)
			}
		}
	}
}
