package ingest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
)

// Preview tokens (docs/flag-documents.md, "Preview tokens"): a token lets
// one browser see one unstarted draft code experiment of one project as if
// it were started, for 24 hours. It is
//
//	p1.<base64url(project ":" flag key ":" expiry in epoch ms)>.<base64url(HMAC-SHA256)>
//
// signed with a 32-byte key that every process shares through the object
// store (previewKeyObject), created by the first process that needs it.

// PreviewTokenTTL is how long a preview token is valid.
const PreviewTokenTTL = 24 * time.Hour

// previewKeyObject is the object holding the signing key, hex-encoded.
const previewKeyObject = "flags/preview-token-key.hex"

const previewTokenPrefix = "p1."

// previewMACLabel separates the token MAC from any other use of the key.
const previewMACLabel = "svc-preview-token/v1\x00"

// PreviewToken is an issued preview token.
type PreviewToken struct {
	// Token is the value of the `svc-preview-token` query parameter.
	Token string
	// Project and Flag name the draft experiment it previews.
	Project, Flag string
	// ExpiresAt is when it stops working.
	ExpiresAt time.Time
}

// IssuePreviewToken issues a token that adds the unstarted draft code
// experiment flagKey of project projectID to the browser document of the
// project's website sources, for PreviewTokenTTL from now. It fails with
// ErrFlagNotFound when the project has no such flag and with
// ErrNotDraftExperiment when the flag is not an unstarted draft code
// experiment (a flag the website reads, with `e`, `off` 1, not `orig`).
// The admin API calls it; the signing key is read from (or, the first
// time, created in) bucket.
func IssuePreviewToken(ctx context.Context, bucket storage.Bucket, st *catalog.State, projectID, flagKey string, now time.Time) (PreviewToken, error) {
	f, ok := st.Flag(projectID, flagKey)
	if !ok {
		return PreviewToken{}, fmt.Errorf("cannot issue a preview token for flag %q of project %s: %w", flagKey, projectID, ErrFlagNotFound)
	}
	if !isDraftExperiment(f) {
		return PreviewToken{}, fmt.Errorf("cannot issue a preview token for flag %q of project %s: %w", flagKey, projectID, ErrNotDraftExperiment)
	}
	key, err := loadPreviewKey(ctx, bucket)
	if err != nil {
		return PreviewToken{}, fmt.Errorf("cannot issue a preview token: %w", err)
	}
	exp := now.Add(PreviewTokenTTL).Truncate(time.Millisecond)
	return PreviewToken{
		Token:     signPreviewToken(key, projectID, flagKey, exp),
		Project:   projectID,
		Flag:      flagKey,
		ExpiresAt: exp,
	}, nil
}

func signPreviewToken(key []byte, project, flag string, exp time.Time) string {
	payload := project + ":" + flag + ":" + strconv.FormatInt(exp.UnixMilli(), 10)
	return previewTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(previewMAC(key, payload))
}

func previewMAC(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(previewMACLabel))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// parsePreviewToken checks a token's signature and expiry and returns the
// project and flag key it names.
func parsePreviewToken(key []byte, tok string, now time.Time) (project, flag string, ok bool) {
	rest, found := strings.CutPrefix(tok, previewTokenPrefix)
	if !found || len(tok) > 512 {
		return "", "", false
	}
	p64, m64, found := strings.Cut(rest, ".")
	if !found {
		return "", "", false
	}
	// One token has one spelling: Strict refuses unused low bits that are
	// not zero, and the line breaks the decoder would skip are refused here
	// (FuzzPreviewToken found a token with a \r inside that opened).
	if strings.ContainsAny(rest, "\r\n") {
		return "", "", false
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(p64)
	if err != nil {
		return "", "", false
	}
	mac, err := base64.RawURLEncoding.Strict().DecodeString(m64)
	if err != nil || !hmac.Equal(mac, previewMAC(key, string(payload))) {
		return "", "", false
	}
	parts := strings.Split(string(payload), ":")
	if len(parts) != 3 {
		return "", "", false
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || now.UnixMilli() >= exp {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// loadPreviewKey reads the shared signing key, creating it when absent;
// of processes racing to create it, one wins and all use its key.
func loadPreviewKey(ctx context.Context, bucket storage.Bucket) ([]byte, error) {
	for attempt := 0; attempt < 3; attempt++ {
		data, _, err := storage.ReadAll(ctx, bucket, previewKeyObject)
		if err == nil {
			key, derr := hex.DecodeString(string(bytes.TrimSpace(data)))
			if derr != nil || len(key) < 32 {
				return nil, fmt.Errorf("the preview token key %q is not 32 or more hex-encoded bytes", previewKeyObject)
			}
			return key, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return nil, fmt.Errorf("cannot read the preview token key %q: %w", previewKeyObject, err)
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand, Go 1.24+)
		_, err = bucket.PutIf(ctx, previewKeyObject, strings.NewReader(hex.EncodeToString(key)), storage.IfAbsent())
		if err == nil {
			return key, nil
		}
		if !errors.Is(err, storage.ErrPreconditionFailed) {
			return nil, fmt.Errorf("cannot store a new preview token key %q: %w", previewKeyObject, err)
		}
		// Another process created it first: read theirs.
	}
	return nil, fmt.Errorf("cannot read or create the preview token key %q", previewKeyObject)
}

// previewKeys holds the signing key for the flag endpoints: loaded on the
// first token seen, kept for the life of the process. After a failure it
// is tried again at most every retryAfter.
type previewKeys struct {
	bucket     storage.Bucket
	retryAfter time.Duration

	mu     sync.Mutex
	key    []byte
	failed time.Time
}

// get returns the key, or nil when it cannot be had now.
func (p *previewKeys) get(ctx context.Context, now time.Time) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.key != nil {
		return p.key, nil
	}
	if !p.failed.IsZero() && now.Sub(p.failed) < p.retryAfter {
		return nil, nil
	}
	key, err := loadPreviewKey(ctx, p.bucket)
	if err != nil {
		p.failed = now
		return nil, err
	}
	p.key = key
	return key, nil
}
