package storage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mfhq/mf/storage"
)

// A read-modify-write that never loses an update: read the object with its
// ETag, write the new version only if the ETag is still current, and retry
// from the read when another writer came first.
func Example_compareAndSwap() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "mf-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	bucket, err := storage.Open(ctx, storage.Config{Dir: dir}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer bucket.Close()

	// Create-only: a second create of the same key fails.
	_, err = bucket.PutIf(ctx, "counters/visits", strings.NewReader("41"), storage.IfAbsent())
	fmt.Println("create:", err)
	_, err = bucket.PutIf(ctx, "counters/visits", strings.NewReader("0"), storage.IfAbsent())
	fmt.Println("create again:", errors.Is(err, storage.ErrPreconditionFailed))

	for {
		data, attrs, err := storage.ReadAll(ctx, bucket, "counters/visits")
		if err != nil {
			fmt.Println(err)
			return
		}
		n, _ := strconv.Atoi(string(data))
		_, err = bucket.PutIf(ctx, "counters/visits", strings.NewReader(strconv.Itoa(n+1)), storage.IfMatch(attrs.ETag))
		if errors.Is(err, storage.ErrPreconditionFailed) {
			continue // changed since the read: read again
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		break
	}
	data, _, _ := storage.ReadAll(ctx, bucket, "counters/visits")
	fmt.Println("visits:", string(data))
	// Output:
	// create: <nil>
	// create again: true
	// visits: 42
}
