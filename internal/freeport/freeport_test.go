package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Ports are below the ephemeral range, free, and never handed out twice.
func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := Ports(3)
		if err != nil {
			t.Fatal(err)
		}
		for q := p; q < p+3; q++ {
			if q < low || q >= ephemeralLow() {
				t.Fatalf("port %d is outside [%d, %d)", q, low, ephemeralLow())
			}
			if seen[q] {
				t.Fatalf("port %d handed out twice", q)
			}
			seen[q] = true
		}
	}
	// A port that is taken is passed over.
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	q, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	if q == p+1 {
		t.Fatalf("port %d is listened on but was handed out", q)
	}
}
