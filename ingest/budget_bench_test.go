package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage/eventlog"
)

// BenchmarkBudgetPerBatch measures, in one run, what the rate budgets and
// the monthly allowance cost per batch (a batch is charged to two buckets:
// its client address and its key):
//
//   - limiter/alone: today's in-process token buckets, one process alone;
//   - limiter/share2: the same divided between two live processes (what mf
//     ingest does on an external log);
//   - kv-cas: the alternative not taken, one shared bucket per key in a
//     JetStream key-value bucket on a NATS server over loopback TCP, a get
//     and an update on the revision read per charge;
//   - allowance/per-batch: a read and a conditional write of the
//     organization's counter object per batch (AllowanceChunk 0, what every
//     batch cost before), on a local object store;
//   - allowance/blocks: blocks of up to 1,000 events handed out from memory
//     (AllowanceChunk 1000, the default).
func BenchmarkBudgetPerBatch(b *testing.B) {
	now := time.Now()
	lim := limit{Amount: 1e12, Per: time.Second}
	for _, n := range []int{1, 2} {
		name := map[int]string{1: "limiter/alone", 2: "limiter/share2"}[n]
		b.Run(name, func(b *testing.B) {
			share := NewShare()
			share.Set(n)
			addr, key := newLimiter(lim, share), newLimiter(lim, share)
			b.ReportAllocs()
			for b.Loop() {
				addr.take("203.0.113.7", 1, now)
				key.take("mf_abcd1234_x|198.51.100.0", 10, now)
			}
		})
	}
	b.Run("kv-cas", func(b *testing.B) {
		kv := benchKV(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			for _, k := range []string{"addr.203-0-113-7", "key.mf_abcd1234_x"} {
				if err := kvTake(ctx, kv, k, 10, lim); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, chunk := range []int{0, 1000} {
		name := map[int]string{0: "allowance/per-batch", 1000: "allowance/blocks"}[chunk]
		b.Run(name, func(b *testing.B) {
			a := newAllowance(apptest.OpenBucket(b, filepath.Join(b.TempDir(), "objects")), chunk)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if got, err := a.reserve(ctx, "org", "2026-11", math.MaxInt64, 10); err != nil || got != 10 {
					b.Fatalf("reserve: %d %v", got, err)
				}
			}
		})
	}
}

// benchKV starts a NATS server with JetStream on loopback (mf's own
// embedded log) and returns a key-value bucket on it, reached over TCP.
func benchKV(b *testing.B) jetstream.KeyValue {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := apptest.Start(b, apptest.Options{Log: func(c *eventlog.Config) { c.ListenAddr = "127.0.0.1:0" }})
	nc, err := nats.Connect(st.Log.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "bench_budgets", History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		b.Fatal(err)
	}
	return kv
}

// kvTake charges n to the token bucket key held in kv (tokens and last
// refill time), with compare-and-set on the revision read.
func kvTake(ctx context.Context, kv jetstream.KeyValue, key string, n float64, l limit) error {
	rate := l.Amount / l.Per.Seconds()
	for {
		tokens, last, rev := l.Amount, time.Now(), uint64(0)
		e, err := kv.Get(ctx, key)
		switch {
		case err == nil:
			v := e.Value()
			tokens = math.Float64frombits(binary.BigEndian.Uint64(v[:8]))
			last = time.Unix(0, int64(binary.BigEndian.Uint64(v[8:16])))
			rev = e.Revision()
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return err
		}
		now := time.Now()
		tokens = math.Min(l.Amount, tokens+now.Sub(last).Seconds()*rate)
		if tokens > 0 {
			tokens -= n
		}
		var v [16]byte
		binary.BigEndian.PutUint64(v[:8], math.Float64bits(tokens))
		binary.BigEndian.PutUint64(v[8:], uint64(now.UnixNano()))
		if rev == 0 {
			_, err = kv.Create(ctx, key, v[:])
		} else {
			_, err = kv.Update(ctx, key, v[:], rev)
		}
		if err == nil || (!errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch)) {
			return err
		}
	}
}
