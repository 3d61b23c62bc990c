package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mfhq/mf/storage"
)

// allowance counts the events each organization stored in a calendar month
// (UTC), durably and shared by every ingest process: one small counter
// object per organization and month in the object store, changed only by
// compare-and-swap puts. Only organizations with a finite monthly allowance
// are counted.
//
// A process does not write the counter per batch: it takes events from
// the counter in blocks (what the batch needs plus up to Chunk more) and
// hands them out from memory; refunds (a failed or duplicate publish) go
// back to that block. What is left of a block is given back to the
// counter every Flush and at Close. So the counter never says less than
// what was stored: a crash can leave events counted that were never stored
// (at most what the process held, Chunk plus one batch), never the other
// way round, and the plan's allowance is never exceeded.
type allowance struct {
	bucket storage.Bucket
	chunk  int64
	mu     sync.Mutex
	orgs   map[string]*orgAllowance // by allowanceKey
}

// orgAllowance is what this process holds of one organization's month.
type orgAllowance struct {
	mu   sync.Mutex // serializes this organization's updates in this process
	held int64      // taken from the counter, not yet handed out
	gone bool       // flushed and dropped from the map: look it up again
}

func newAllowance(b storage.Bucket, chunk int) *allowance {
	return &allowance{bucket: b, chunk: int64(chunk), orgs: make(map[string]*orgAllowance)}
}

// allowanceMonth is the counting period of now.
func allowanceMonth(now time.Time) string { return now.UTC().Format("2006-01") }

func allowanceKey(org, month string) string { return "allowance/" + org + "/" + month + ".count" }

// lock returns key's entry, locked.
func (a *allowance) lock(key string) *orgAllowance {
	for {
		a.mu.Lock()
		e, ok := a.orgs[key]
		if !ok {
			e = new(orgAllowance)
			a.orgs[key] = e
		}
		a.mu.Unlock()
		e.mu.Lock()
		if !e.gone {
			return e
		}
		e.mu.Unlock()
	}
}

// reserve takes up to n events of org's allowance limit for month and
// returns how many it got (0 when the allowance is used up). It reads the
// counter only when what this process holds does not cover n.
func (a *allowance) reserve(ctx context.Context, org, month string, limit int64, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	key := allowanceKey(org, month)
	e := a.lock(key)
	defer e.mu.Unlock()
	if need := int64(n) - e.held; need > 0 {
		// Take what is missing and up to chunk more; near the end of
		// the allowance less, so that one process does not keep what
		// the others need.
		_, err := a.add(ctx, key, func(used int64) int64 {
			left := limit - used
			if left <= 0 {
				return 0
			}
			extra := max(0, min(a.chunk, (left-need)/4))
			return min(need+extra, left)
		}, func(d int64) { e.held += d })
		if err != nil {
			return 0, err
		}
	}
	got := min(int64(n), e.held)
	e.held -= got
	return int(got), nil
}

// refund gives back n events reserved in month: they go back to what this
// process holds, and so to the counter at the next flush.
func (a *allowance) refund(_ context.Context, org, month string, n int) error {
	if n <= 0 {
		return nil
	}
	e := a.lock(allowanceKey(org, month))
	e.held += int64(n)
	e.mu.Unlock()
	return nil
}

// flush gives back to the counters what this process holds, and forgets
// the months it holds nothing of. It returns the first error met; what
// could not be given back stays held, to be given back next time.
func (a *allowance) flush(ctx context.Context) error {
	a.mu.Lock()
	keys := make([]string, 0, len(a.orgs))
	for k := range a.orgs {
		keys = append(keys, k)
	}
	a.mu.Unlock()
	var first error
	for _, key := range keys {
		e := a.lock(key)
		if e.held > 0 {
			held := e.held
			_, err := a.add(ctx, key, func(used int64) int64 { return -min(held, used) }, func(int64) { e.held = 0 })
			if err != nil && first == nil {
				first = err
			}
		}
		if e.held == 0 {
			e.gone = true
			a.mu.Lock()
			delete(a.orgs, key)
			a.mu.Unlock()
		}
		e.mu.Unlock()
	}
	return first
}

// used returns the events counted for org in month.
func (a *allowance) used(ctx context.Context, org, month string) (int64, error) {
	v, _, err := a.read(ctx, allowanceKey(org, month))
	return v, err
}

func (a *allowance) read(ctx context.Context, key string) (int64, string, error) {
	data, attrs, err := storage.ReadAll(ctx, a.bucket, key)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("cannot read allowance counter %q: %w", key, err)
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("allowance counter %q is corrupt: %w", key, err)
	}
	return v, attrs.ETag, nil
}

// add applies delta(used) to the counter key with compare-and-swap,
// retrying when another process changed it in between, calls applied with
// the delta once it is written, and returns it.
func (a *allowance) add(ctx context.Context, key string, delta func(used int64) int64, applied func(int64)) (int64, error) {
	for attempt := 0; ; attempt++ {
		used, etag, err := a.read(ctx, key)
		if err != nil {
			return 0, err
		}
		d := delta(used)
		if d == 0 {
			applied(0)
			return 0, nil
		}
		cond := storage.IfAbsent()
		if etag != "" {
			cond = storage.IfMatch(etag)
		}
		_, err = a.bucket.PutIf(ctx, key, bytes.NewReader(strconv.AppendInt(nil, used+d, 10)), cond)
		if err == nil {
			applied(d)
			return d, nil
		}
		if !errors.Is(err, storage.ErrPreconditionFailed) || attempt >= 50 {
			return 0, fmt.Errorf("cannot update allowance counter %q: %w", key, err)
		}
	}
}
