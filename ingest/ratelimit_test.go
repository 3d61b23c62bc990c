package ingest

import (
	"testing"
	"time"
)

func TestLimiterRefusesOnlyOnceSpent(t *testing.T) {
	l := newLimiter(limit{Amount: 100, Per: time.Minute}, nil)
	now := time.Unix(1_800_000_000, 0)
	if ok, _ := l.take("k", 99, now); !ok {
		t.Fatal("first charge of 99 out of 100 refused")
	}
	// One unit left: a charge of 1,000 still passes (a batch larger than the
	// remaining budget is not refused).
	if ok, _ := l.take("k", 1000, now); !ok {
		t.Fatal("charge with 1 unit left refused; the bucket must refuse only once spent")
	}
	ok, wait := l.take("k", 1, now)
	if ok {
		t.Fatal("spent bucket accepted a charge")
	}
	// 999 units below zero at 100/min: about 10 minutes until positive.
	if wait < 9*time.Minute || wait > 11*time.Minute {
		t.Fatalf("wait = %v, want about 10m", wait)
	}
	if ok, _ := l.take("other", 1, now); !ok {
		t.Fatal("another key shares the spent budget")
	}
	if ok, _ := l.take("k", 1, now.Add(wait)); !ok {
		t.Fatalf("bucket still refuses after the advertised wait %v", wait)
	}
}

func TestLimiterRefillsContinuously(t *testing.T) {
	l := newLimiter(limit{Amount: 10, Per: time.Second}, nil)
	now := time.Unix(1_800_000_000, 0)
	for i := 0; i < 10; i++ {
		if ok, _ := l.take("a", 1, now); !ok {
			t.Fatalf("request %d of 10 refused", i)
		}
	}
	if ok, wait := l.take("a", 1, now); ok || wait != time.Second {
		t.Fatalf("11th request: ok=%v wait=%v, want refused with 1s", ok, wait)
	}
	// 300 ms refill 3 units.
	later := now.Add(300 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if ok, _ := l.take("a", 1, later); !ok {
			t.Fatalf("refilled unit %d refused", i)
		}
	}
	if ok, _ := l.take("a", 1, later); ok {
		t.Fatal("more than the refilled units accepted")
	}
}

func TestLimiterSweepKeepsActiveBuckets(t *testing.T) {
	l := newLimiter(limit{Amount: 5, Per: time.Second}, nil)
	now := time.Unix(1_800_000_000, 0)
	for i := 0; i < 5; i++ {
		l.take("busy", 1, now)
	}
	for i := 0; i < 70_000; i++ {
		l.take(string(rune('a'+i%26))+string(rune(i)), 1, now.Add(time.Hour))
	}
	// The busy bucket refilled long ago and may be swept; what matters is
	// that it answers as a full bucket now.
	if ok, _ := l.take("busy", 1, now.Add(time.Hour)); !ok {
		t.Fatal("busy key refused after an hour of refill")
	}
}

func BenchmarkLimiterTake(b *testing.B) {
	l := newLimiter(limit{Amount: 1e9, Per: time.Second}, nil)
	now := time.Now()
	keys := []string{"203.0.113.7", "2001:db8::/64", "mf_abcd1234_x|198.51.100.0"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.take(keys[i%len(keys)], 1, now)
			i++
		}
	})
}

// TestLimiterShare: with a Share of N live ingest processes each bucket
// holds and refills 1/N of the budget, Retry-After grows to match, a
// bucket filled before a process joined is cut down to its new part, and
// one left alone earns the whole budget back.
func TestLimiterShare(t *testing.T) {
	share := NewShare()
	share.Set(2)
	l := newLimiter(limit{Amount: 100, Per: time.Minute}, share)
	now := time.Unix(1_800_000_000, 0)
	// 50 of 100: a charge of 49, then 1 more passes, then refused.
	for i, n := range []float64{49, 20.5} {
		if ok, _ := l.take("k", n, now); !ok {
			t.Fatalf("charge %d (%v) refused with budget left", i, n)
		}
	}
	ok, wait := l.take("k", 1, now)
	if ok {
		t.Fatal("a bucket holding half the budget accepted more than half")
	}
	// 19.5 below zero refilling 50/min: 23.4s, rounded up.
	if wait != 24*time.Second {
		t.Fatalf("wait = %v, want 24s (19.5 units at half of 100/min)", wait)
	}

	// A bucket full for one process is cut to a third when two more join.
	share.Set(1)
	if ok, _ := l.take("j", 90, now); !ok {
		t.Fatal("alone: a charge of 90 of 100 refused")
	}
	share.Set(3)
	later := now.Add(time.Hour) // refilled to the brim, whatever the brim is
	if ok, _ := l.take("j", 34, later); !ok {
		t.Fatal("a third of the budget: the first charge refused")
	}
	if ok, _ := l.take("j", 1, later); ok {
		t.Fatal("a bucket refilled past a third of the budget with three processes live")
	}
	if share.Processes() != 3 || (*Share)(nil).Processes() != 1 {
		t.Fatal("Processes does not report what Set stored, or a nil Share is not one process")
	}
}

// BenchmarkLimiterTakeShared is BenchmarkLimiterTake with the budgets
// divided among two live processes: what the share costs per charge (one
// atomic load and a division), measured in the same run.
func BenchmarkLimiterTakeShared(b *testing.B) {
	share := NewShare()
	share.Set(2)
	l := newLimiter(limit{Amount: 1e9, Per: time.Second}, share)
	now := time.Now()
	keys := []string{"203.0.113.7", "2001:db8::/64", "mf_abcd1234_x|198.51.100.0"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.take(keys[i%len(keys)], 1, now)
			i++
		}
	})
}
