package facts

import (
	"fmt"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// BenchmarkEraseCheckAfterRestore measures what the first erasure after a
// restart costs to decide whether it can leave the cold days unread
// (Engine.alone): a restored engine's parts are still encoded, and the
// check reads every other part's cold touches. It reports the parts it
// left encoded; the time and bytes are the check's alone.
//
//	go test ./processor/internal/facts -run '^$' -bench BenchmarkEraseCheckAfterRestore -benchtime 5x
func BenchmarkEraseCheckAfterRestore(b *testing.B) {
	const browsers = 100_000
	ct := newColdTest(b)
	ct.e.cfg.CheckActivity = false
	day := coldDay0
	var batch []records.Event
	for i := range browsers {
		user := ""
		if i%10 == 0 {
			user = fmt.Sprintf("u%d", i)
		}
		at := day.Add(time.Duration(i%600) * time.Minute)
		ev := ct.ev(fmt.Sprintf("b%d", i), user, at)
		ev.ID = records.UUID{0xe1, byte(i >> 16), byte(i >> 8), byte(i), 6: 0x40, 8: 0x80}
		batch = append(batch, ev)
		if len(batch) == 1000 {
			ct.e.AddBatch(ct.batch(day.Add(11*time.Hour), batch...))
			batch = nil
		}
	}
	ct.e.Flush()
	ct.e.Freeze(day.Add(72*time.Hour).UnixMilli(), 0)
	ct.e.Flush()
	rows, act := ct.e.State(), ct.e.ActivityRows()
	target := NodeRef(coldProject, KindUser, "u500")
	encoded := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		e, _, _, err := Restore(ct.e.cfg, rows, act)
		if err != nil {
			b.Fatal(err)
		}
		e.Settle()
		p := e.personNode(target)
		mem := p.members()
		b.StartTimer()
		if !e.alone(p, mem) {
			b.Fatal("the person shares nothing, yet alone says otherwise")
		}
		b.StopTimer()
		encoded = 0
		for _, n := range e.nodes {
			if n.enc != nil {
				encoded++
			}
		}
	}
	b.ReportMetric(float64(encoded), "parts-left-encoded")
}
