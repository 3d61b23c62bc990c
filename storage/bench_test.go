package storage_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/storagetest"
)

var benchSizes = []int{1 << 20, 64 << 20}

func sizeName(n int) string { return fmt.Sprintf("%dMiB", n>>20) }

// BenchmarkLocalPut measures a durable put (write, fsync, rename, fsync of
// the directory) into the local directory backend.
func BenchmarkLocalPut(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			benchPut(b, openLocal(b, b.TempDir()), size)
		})
	}
}

// BenchmarkLocalGet measures reading a whole object from the local
// directory backend (page cache warm).
func BenchmarkLocalGet(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			benchGet(b, openLocal(b, b.TempDir()), size)
		})
	}
}

// BenchmarkS3Put and BenchmarkS3Get measure the same against a real MinIO
// on 127.0.0.1, for comparison.
func BenchmarkS3Put(b *testing.B) {
	server := storagetest.StartMinIO(b)
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			benchPut(b, openS3(b, storagetest.FreshBucket(b, server)), size)
		})
	}
}

func BenchmarkS3Get(b *testing.B) {
	server := storagetest.StartMinIO(b)
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			benchGet(b, openS3(b, storagetest.FreshBucket(b, server)), size)
		})
	}
}

func benchData(size int) []byte {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	return data
}

func benchPut(b *testing.B, bk storage.Bucket, size int) {
	data := benchData(size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bk.Put(b.Context(), "bench/object", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func benchGet(b *testing.B, bk storage.Bucket, size int) {
	if _, err := bk.Put(b.Context(), "bench/object", bytes.NewReader(benchData(size))); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		obj, err := bk.Get(b.Context(), "bench/object")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, obj)
		obj.Close()
		if err != nil || n != int64(size) {
			b.Fatalf("read %d bytes, %v", n, err)
		}
	}
}
