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
// are counted. Events are reserved before a batch is published and given
// back when the publish fails or finds the batch already stored, so a
// resend is never counted twice.
type allowance struct {
	bucket storage.Bucket
	mu     sync.Mutex
	orgs   map[string]*sync.Mutex // serializes one organization's updates in this process
}

func newAllowance(b storage.Bucket) *allowance {
	return &allowance{bucket: b, orgs: make(map[string]*sync.Mutex)}
}

// allowanceMonth is the counting period of now.
func allowanceMonth(now time.Time) string { return now.UTC().Format("2006-01") }

func allowanceKey(org, month string) string { return "allowance/" + org + "/" + month + ".count" }

func (a *allowance) lock(org string) func() {
	a.mu.Lock()
	m, ok := a.orgs[org]
	if !ok {
		m = new(sync.Mutex)
		a.orgs[org] = m
	}
	a.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// reserve takes up to n events of org's allowance limit for month and
// returns how many it got (0 when the allowance is used up).
func (a *allowance) reserve(ctx context.Context, org, month string, limit int64, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	return a.add(ctx, org, month, func(used int64) int64 {
		left := limit - used
		if left <= 0 {
			return 0
		}
		return min(int64(n), left)
	})
}

// refund gives back n events reserved in month.
func (a *allowance) refund(ctx context.Context, org, month string, n int) error {
	if n <= 0 {
		return nil
	}
	_, err := a.add(ctx, org, month, func(used int64) int64 { return -min(int64(n), used) })
	return err
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

// add applies delta(used) to the counter with compare-and-swap, retrying
// when another process changed it in between, and returns the delta taken.
func (a *allowance) add(ctx context.Context, org, month string, delta func(used int64) int64) (int, error) {
	defer a.lock(org)()
	key := allowanceKey(org, month)
	for attempt := 0; ; attempt++ {
		used, etag, err := a.read(ctx, key)
		if err != nil {
			return 0, err
		}
		d := delta(used)
		if d == 0 {
			return 0, nil
		}
		cond := storage.IfAbsent()
		if etag != "" {
			cond = storage.IfMatch(etag)
		}
		_, err = a.bucket.PutIf(ctx, key, bytes.NewReader(strconv.AppendInt(nil, used+d, 10)), cond)
		if err == nil {
			return int(d), nil
		}
		if !errors.Is(err, storage.ErrPreconditionFailed) || attempt >= 50 {
			return 0, fmt.Errorf("cannot update allowance counter %q: %w", key, err)
		}
	}
}
