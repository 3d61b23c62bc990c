package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mfhq/mf/storage"
)

// AccessRecord is one call to the reporting API, recorded against the
// person whose credential made it. Query parameters are never recorded,
// and the endpoint is the route (with {placeholders}), not the path, so
// that person refs never reach the record.
type AccessRecord struct {
	At time.Time `json:"at"`
	// Credential names the credential without its secret: the API key's
	// public prefix (mf_pat_xxxxxxxx) or "app:<app>" for an app token.
	Credential string `json:"credential"`
	// App is the app an access token was issued to; empty for API keys.
	App string `json:"app,omitempty"`
	// Endpoint is the method and route, such as "GET /projects/{project_id}".
	Endpoint string `json:"endpoint"`
	// Project is the project id of the path, empty for the project list.
	Project string `json:"project,omitempty"`
	// Via is "mcp" for a call through the agent-facing server (a tool
	// call, or a refusal at /mcp); empty for the REST API.
	Via string `json:"via,omitempty"`
	// Tool is the tool an agent called; Endpoint is then the REST
	// endpoint the tool answers from.
	Tool string `json:"tool,omitempty"`
	// Status is the HTTP status answered.
	Status int `json:"status"`
	// Outcome is "ok", or the reason for a refusal: "key_revoked",
	// "key_expired", "rate_limited", "not_found", "invalid_parameter", ...
	Outcome string `json:"outcome"`
}

// accessPrefix is where durable access records go: one JSON-lines object
// per flush and user, reporting/access/<user>/<unix nanos, 20 digits>-<process>.jsonl.
const accessPrefix = "reporting/access/"

// accessLog keeps a bounded ring of recent access per user in memory and
// appends every record durably to the object store in batches.
type accessLog struct {
	bucket  storage.Bucket
	size    int
	logger  *slog.Logger
	process string // random id of this process, in the object keys it writes

	mu      sync.Mutex
	rings   map[string][]AccessRecord // newest last, at most size
	seeded  map[string]bool
	pending map[string][]AccessRecord
}

func newAccessLog(b storage.Bucket, size int, logger *slog.Logger) *accessLog {
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &accessLog{bucket: b, size: size, logger: logger, process: hex.EncodeToString(id[:]),
		rings: map[string][]AccessRecord{}, seeded: map[string]bool{}, pending: map[string][]AccessRecord{}}
}

// record adds r to user's ring and to the next flush.
func (a *accessLog) record(user string, r AccessRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rings[user] = pushRing(a.rings[user], r, a.size)
	a.pending[user] = append(a.pending[user], r)
}

func pushRing(ring []AccessRecord, r AccessRecord, size int) []AccessRecord {
	if len(ring) >= size {
		ring = append(ring[:0], ring[len(ring)-size+1:]...)
	}
	return append(ring, r)
}

// flush writes the pending records, one object per user. Records that
// cannot be written are kept for the next flush.
func (a *accessLog) flush(ctx context.Context) error {
	a.mu.Lock()
	pending := a.pending
	a.pending = map[string][]AccessRecord{}
	a.mu.Unlock()
	var firstErr error
	for user, recs := range pending {
		var b bytes.Buffer
		for _, r := range recs {
			if err := writeJSON(&b, r); err != nil {
				return fmt.Errorf("cannot encode an access record: %w", err)
			}
			b.WriteByte('\n')
		}
		key := fmt.Sprintf("%s%s/%020d-%s.jsonl", accessPrefix, user, time.Now().UnixNano(), a.process)
		if _, err := a.bucket.Put(ctx, key, &b); err != nil {
			a.mu.Lock()
			a.pending[user] = append(recs, a.pending[user]...)
			a.mu.Unlock()
			if firstErr == nil {
				firstErr = fmt.Errorf("cannot store access records %q: %w", key, err)
			}
		}
	}
	return firstErr
}

// recent returns user's latest records, newest first. The first call for
// a user fills the ring from what other processes and earlier runs stored.
func (a *accessLog) recent(ctx context.Context, user string) ([]AccessRecord, error) {
	a.mu.Lock()
	seeded := a.seeded[user]
	a.mu.Unlock()
	if !seeded {
		stored, err := a.load(ctx, user)
		if err != nil {
			return nil, err
		}
		a.mu.Lock()
		if !a.seeded[user] {
			merged := append(stored, a.rings[user]...)
			slices.SortStableFunc(merged, func(x, y AccessRecord) int { return x.At.Compare(y.At) })
			if len(merged) > a.size {
				merged = merged[len(merged)-a.size:]
			}
			a.rings[user] = merged
			a.seeded[user] = true
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ring := a.rings[user]
	out := make([]AccessRecord, len(ring))
	for i, r := range ring {
		out[len(ring)-1-i] = r
	}
	return out, nil
}

// load reads the newest stored records of user written by other
// processes (this process's own are in its ring already), up to the ring
// size.
func (a *accessLog) load(ctx context.Context, user string) ([]AccessRecord, error) {
	prefix := accessPrefix + user + "/"
	var keys []string
	err := a.bucket.List(ctx, prefix, func(o storage.ObjectInfo) error {
		if !strings.HasSuffix(o.Key, "-"+a.process+".jsonl") {
			keys = append(keys, o.Key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list the access records of user %q: %w", user, err)
	}
	var out []AccessRecord
	for i := len(keys) - 1; i >= 0 && len(out) < a.size; i-- {
		recs, err := a.read(ctx, keys[i])
		if err != nil {
			return nil, err
		}
		out = append(recs, out...)
	}
	if len(out) > a.size {
		out = out[len(out)-a.size:]
	}
	return out, nil
}

func (a *accessLog) read(ctx context.Context, key string) ([]AccessRecord, error) {
	obj, err := a.bucket.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("cannot read access records %q: %w", key, err)
	}
	defer obj.Close()
	var out []AccessRecord
	sc := bufio.NewScanner(obj)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var r AccessRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("cannot decode access records %q: %w", key, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read access records %q: %w", key, err)
	}
	return out, nil
}
