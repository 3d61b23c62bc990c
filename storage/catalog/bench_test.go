package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func BenchmarkParse(b *testing.B) {
	data := readTestdata(b, "valid/full.json")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlan is the work of an apply before the log: merge, checks
// across entities, compile and size caps.
func BenchmarkPlan(b *testing.B) {
	data := readTestdata(b, "valid/full.json")
	st := stateOf(b, "valid/full.json")
	f, err := Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := st.Plan(f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSourceByKey(b *testing.B) {
	st := stateOf(b, "valid/full.json")
	for _, bc := range []struct{ name, key string }{
		{"website", "mf_shopweb1_Website-Key_1"},
		{"secret", "mf_shopsrv1_S3cret-Server-Key_xyzXYZ0123456789"},
		{"unknown", "mf_nothing1_Unknown-Key"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.key)))
			for b.Loop() {
				st.SourceByKey(bc.key)
			}
		})
	}
}

func BenchmarkAPIKey(b *testing.B) {
	st := stateOf(b, "valid/full.json")
	const token = "mf_pat_ada00001_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
	b.ReportAllocs()
	b.SetBytes(int64(len(token)))
	for b.Loop() {
		if _, _, ok := st.APIKey(token); !ok {
			b.Fatal("not found")
		}
	}
}

// bigCatalog is a provisioning file of orgs organizations with 5 projects
// of 4 sources, 10 actions, 5 segments and 20 flags each.
func bigCatalog(orgs int) []byte {
	var b []byte
	id := func(kind, n int) string { return fmt.Sprintf("%d0000000-0000-4000-8000-%012d", kind, n) }
	b = append(b, `{"organizations":[`...)
	for o := range orgs {
		if o > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id":%q,"slug":"org-%d","name":"Org","plan":"pro","projects":[`, id(1, o), o)
		for p := range 5 {
			pn := o*5 + p
			if p > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `{"id":%q,"slug":"p%d","name":"P","timezone":"Europe/Berlin","reportingCurrency":"EUR","sources":[`, id(2, pn), p)
			for s := range 4 {
				if s > 0 {
					b = append(b, ',')
				}
				b = fmt.Appendf(b, `{"id":%q,"name":"S","kind":"server","mode":"full","key":"mf_%08d_Key-%d"}`, id(3, pn*4+s), pn, s)
			}
			b = append(b, `],"actions":[`...)
			for a := range 10 {
				if a > 0 {
					b = append(b, ',')
				}
				b = fmt.Appendf(b, `{"id":%q,"name":"A","match":{"event":"e%d"}}`, id(4, pn*10+a), a)
			}
			b = append(b, `],"segments":[`...)
			for s := range 5 {
				if s > 0 {
					b = append(b, ',')
				}
				b = fmt.Appendf(b, `{"id":%q,"name":"S","filters":[{"field":"device","op":"is","value":"mobile"}]}`, id(6, pn*5+s))
			}
			b = append(b, `],"flags":[`...)
			for f := range 20 {
				if f > 0 {
					b = append(b, ',')
				}
				b = fmt.Appendf(b, `{"key":"flag-%d","readBy":"both","t":"m","u":"b","d":"a","r":[{"if":[["s",%q]],"x":"b"},{"sh":5000,"w":[["a",5000],["b",5000]]}]}`, f, id(6, pn*5+f%5))
			}
			b = append(b, `]}`...)
		}
		b = append(b, `]}`...)
	}
	return append(b, `]}`...)
}

// BenchmarkFold measures how fast a process folds the catalog topic at
// start: one op folds a transaction of 100 organizations (500 projects,
// 10,000 flags) and builds the State.
func BenchmarkFold(b *testing.B) {
	data := bigCatalog(100)
	_, plan, err := planLocal(emptyState(), data)
	if err != nil {
		b.Fatal(err)
	}
	recs := records(b, plan, 256<<10)
	size := 0
	for _, r := range recs {
		size += len(r)
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	for b.Loop() {
		fd := newFolder(newModel(), testLogger(b))
		for i, r := range recs {
			fd.fold(uint64(i+1), r)
		}
		newState(fd.m, nil)
	}
	b.ReportMetric(float64(len(recs)), "records")
}

// BenchmarkApplyPropagation is the time from Apply on one process until
// another process on the same log sees the change (target: under 1 s).
func BenchmarkApplyPropagation(b *testing.B) {
	l := openTestLog(b, b.TempDir())
	a := openTestCatalog(b, l, DefaultConfig())
	other := openTestCatalog(b, l, DefaultConfig())
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	var worst time.Duration
	for b.Loop() {
		i++
		file := fmt.Appendf(nil, `{"organizations":[{"id":"10000000-0000-4000-8000-000000000001","slug":"o","name":"Org %d","plan":"pro"}]}`, i)
		start := time.Now()
		res, err := a.Apply(ctx, file)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := other.WaitVersion(ctx, res.Version); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
}
