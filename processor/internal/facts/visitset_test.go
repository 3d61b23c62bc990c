package facts

import (
	"math/rand/v2"
	"testing"
)

// TestVisitSet checks the small-slice-then-map set of visits against a
// map, through random adds and removes that cross the slice's limit in
// both directions.
func TestVisitSet(t *testing.T) {
	vs := make([]*visit, 3*smallSet)
	for i := range vs {
		vs[i] = &visit{start: int64(i)}
	}
	r := rand.New(rand.NewPCG(1, 2))
	var s visitSet
	want := map[*visit]bool{}
	for step := range 5000 {
		v := vs[r.IntN(len(vs))]
		// Grow for a while, then shrink, then grow again.
		if (step/1000)%2 == 0 == (r.IntN(4) > 0) {
			s.add(v)
			want[v] = true
		} else {
			s.remove(v)
			delete(want, v)
		}
		got := map[*visit]bool{}
		for v := range s.all() {
			if got[v] {
				t.Fatalf("step %d: visit %d yielded twice", step, v.start)
			}
			got[v] = true
		}
		if len(got) != len(want) {
			t.Fatalf("step %d: %d visits, want %d", step, len(got), len(want))
		}
		for v := range want {
			if !got[v] {
				t.Fatalf("step %d: visit %d missing", step, v.start)
			}
		}
	}
	if s.big == nil {
		t.Errorf("the set never grew past %d visits: the map was not exercised", smallSet)
	}
}
