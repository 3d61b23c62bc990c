package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ErrConditionalWritesIgnored: the store wrote an object although the
// put's precondition did not hold. Manifests, visitor salts, allowances
// and refresh tokens are kept consistent only by conditional puts, so mf
// refuses to run on such a store.
var ErrConditionalWritesIgnored = errors.New("the store ignores conditional writes")

// CheckConditionalWrites checks, with an object of its own under
// "health/conditional-writes/", that b honours both kinds of conditional
// put: a create-only put (IfAbsent; S3 If-None-Match: *) must not replace
// an object, and a compare-and-swap put (IfMatch; S3 If-Match) must not
// replace a version other than the one named, while each succeeds when
// its condition holds. An S3-compatible server (or a proxy before it)
// that drops the headers writes anyway: the error wraps
// ErrConditionalWritesIgnored and names the check that failed. Any other
// failure (the store down) is returned as it is.
func CheckConditionalWrites(ctx context.Context, b Bucket) (err error) {
	var r [8]byte
	_, _ = rand.Read(r[:])
	key := "health/conditional-writes/" + hex.EncodeToString(r[:])
	defer func() {
		if derr := b.Delete(context.WithoutCancel(ctx), key); err == nil && derr != nil {
			err = fmt.Errorf("cannot delete the conditional-write probe %s: %w", key, derr)
		}
	}()
	ignored := func(check string) error {
		return fmt.Errorf("%w: %s", ErrConditionalWritesIgnored, check)
	}
	first, err := b.PutIf(ctx, key, strings.NewReader("first"), IfAbsent())
	if err != nil {
		return fmt.Errorf("a create-only put of a new object failed: %w", err)
	}
	switch _, err := b.PutIf(ctx, key, strings.NewReader("second"), IfAbsent()); {
	case err == nil:
		return ignored("a create-only put (If-None-Match: *) replaced an object that was there")
	case !errors.Is(err, ErrPreconditionFailed):
		return fmt.Errorf("a create-only put of an existing object failed otherwise than by its precondition: %w", err)
	}
	stale := "0" + first // an ETag the object does not have
	switch _, err := b.PutIf(ctx, key, strings.NewReader("third"), IfMatch(stale)); {
	case err == nil:
		return ignored("a compare-and-swap put (If-Match) replaced a version other than the one it named")
	case !errors.Is(err, ErrPreconditionFailed):
		return fmt.Errorf("a compare-and-swap put on a stale ETag failed otherwise than by its precondition: %w", err)
	}
	data, attrs, err := ReadAll(ctx, b, key)
	if err != nil {
		return fmt.Errorf("cannot read the conditional-write probe back: %w", err)
	}
	if string(data) != "first" {
		return ignored(fmt.Sprintf("the probe holds %q after refused conditional puts, want %q", data, "first"))
	}
	if _, err := b.PutIf(ctx, key, strings.NewReader("fourth"), IfMatch(attrs.ETag)); err != nil {
		return fmt.Errorf("a compare-and-swap put on the current ETag failed: %w", err)
	}
	return nil
}
