package api

import (
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRefPrefixes looks refs up through refPrefixes for the cases of
// testdata/report/ref-prefixes.json and compares every answer with a
// binary search over all the refs.
func TestRefPrefixes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "report", "ref-prefixes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name           string
			Refs, Probes   []string
			Random, Shared int
			Seed           uint64
		}
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("ref-prefixes.json: %v", err)
	}
	parse := func(h string) ref {
		var r ref
		if n, err := hex.Decode(r[:], []byte(h)); err != nil || n != len(r) {
			t.Fatalf("ref %q: %d bytes, %v", h, n, err)
		}
		return r
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var refs, probes []ref
			for _, h := range c.Refs {
				refs = append(refs, parse(h))
			}
			for _, h := range c.Probes {
				probes = append(probes, parse(h))
			}
			rng := rand.New(rand.NewPCG(c.Seed, c.Seed))
			for i := range c.Random {
				var r ref
				for j := range r {
					r[j] = byte(rng.UintN(256))
				}
				if i < c.Shared { // many refs of few prefixes
					r[0], r[1] = 0x5a, byte(i%3)
				}
				refs = append(refs, r)
				if i%4 == 0 {
					r[15] ^= 0x80
					probes = append(probes, r)
				}
			}
			slices.SortFunc(refs, compareRef)
			refs = slices.CompactFunc(refs, func(a, b ref) bool { return a == b })
			for _, r := range refs {
				probes = append(probes, r, step(r, 1), step(r, -1))
			}
			p := newRefPrefixes(refs)
			if len(refs) > 0 && len(p) != 1<<16+1 {
				t.Fatalf("%d entries, want %d", len(p), 1<<16+1)
			}
			for _, r := range probes {
				wi, wok := slices.BinarySearchFunc(refs, r, compareRef)
				if gi, gok := p.find(refs, r); gi != wi || gok != wok {
					t.Fatalf("%x: found at %d (%v), want %d (%v)", r, gi, gok, wi, wok)
				}
			}
		})
	}
}

// step adds d (±1) to r as a 128-bit big-endian number, wrapping.
func step(r ref, d int) ref {
	for i := len(r) - 1; i >= 0; i-- {
		r[i] += byte(d)
		if (d > 0 && r[i] != 0) || (d < 0 && r[i] != 0xff) {
			break
		}
	}
	return r
}

// BenchmarkRefLookup looks up refs among a million, as Person does for
// each visit and event of a decoded day: through refPrefixes and by a
// binary search over all of them.
func BenchmarkRefLookup(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	refs := make([]ref, 1_000_000)
	for i := range refs {
		for j := range refs[i] {
			refs[i][j] = byte(rng.UintN(256))
		}
	}
	slices.SortFunc(refs, compareRef)
	probes := make([]ref, 1<<16)
	for i := range probes {
		probes[i] = refs[rng.IntN(len(refs))]
	}
	for _, bc := range []struct {
		name string
		p    refPrefixes
	}{{"prefixes", newRefPrefixes(refs)}, {"binary", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, ok := bc.p.find(refs, probes[i&(len(probes)-1)]); !ok {
					b.Fatal("a ref was not found")
				}
				i++
			}
		})
	}
}
