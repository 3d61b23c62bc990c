package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/storagetest"
)

// TestCheckConditionalWrites: the local directory and a real MinIO keep
// the conditional-write promises; the same MinIO behind a proxy that
// drops If-Match and If-None-Match does not, and the check says which
// promise it broke.
func TestCheckConditionalWrites(t *testing.T) {
	minio := storagetest.StartMinIO(t)
	for _, tc := range []struct {
		name string
		cfg  storage.Config
		want string // "" passes
	}{
		{"local directory", storage.Config{Dir: t.TempDir()}, ""},
		{"MinIO", storage.Config{Store: minio}, ""},
		{"MinIO dropping the conditions", storage.Config{Store: storagetest.ConditionalHeaderDropper(t, storagetest.FreshBucket(t, minio))},
			"a create-only put (If-None-Match: *) replaced an object that was there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := storage.Open(ctx, tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			err = storage.CheckConditionalWrites(ctx, b)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("the check fails: %v", err)
			case tc.want != "" && (!errors.Is(err, storage.ErrConditionalWritesIgnored) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("the check: %v, want ErrConditionalWritesIgnored naming %q", err, tc.want)
			}
			// The probe leaves nothing behind.
			n := 0
			if err := b.List(ctx, "health/", func(storage.ObjectInfo) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d probe objects left under health/", n)
			}
		})
	}
}
