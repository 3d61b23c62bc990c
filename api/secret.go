package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/mfhq/mf/storage"
)

// secretKey is the object that holds the reporting API's master secret: 32
// random bytes, created once with a create-only put so that every API
// process of an installation shares it (docs/reporting-api.md).
const secretKey = "reporting/secret"

// secretLen is the length of the master secret in bytes.
const secretLen = 32

// loadSecret reads the master secret, creating it when the store has none.
// Of racing processes exactly one creation wins; the others read it.
func loadSecret(ctx context.Context, b storage.Bucket) ([]byte, error) {
	for attempt := 0; attempt < 3; attempt++ {
		s, err := readSecret(ctx, b)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return nil, err
		}
		fresh := make([]byte, secretLen)
		if _, err := rand.Read(fresh); err != nil {
			return nil, fmt.Errorf("cannot create the reporting secret: %w", err)
		}
		_, err = b.PutIf(ctx, secretKey, bytes.NewReader(fresh), storage.IfAbsent())
		if err == nil {
			return fresh, nil
		}
		if !errors.Is(err, storage.ErrPreconditionFailed) {
			return nil, fmt.Errorf("cannot store the reporting secret %q: %w", secretKey, err)
		}
	}
	return nil, fmt.Errorf("cannot load the reporting secret %q: it was created but cannot be read back", secretKey)
}

func readSecret(ctx context.Context, b storage.Bucket) ([]byte, error) {
	obj, err := b.Get(ctx, secretKey)
	if err != nil {
		return nil, fmt.Errorf("cannot read the reporting secret %q: %w", secretKey, err)
	}
	defer obj.Close()
	s, err := io.ReadAll(io.LimitReader(obj, secretLen+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the reporting secret %q: %w", secretKey, err)
	}
	if len(s) != secretLen {
		return nil, fmt.Errorf("cannot use the reporting secret %q: it holds %d bytes, not %d", secretKey, len(s), secretLen)
	}
	return s, nil
}

// deriveKey derives a purpose-bound key from the master secret, so that a
// cursor MAC can never pass as a token signature.
func deriveKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("mf reporting key: " + purpose))
	return m.Sum(nil)
}
