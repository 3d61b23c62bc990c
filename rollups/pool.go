package rollups

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow/go/v17/arrow/memory"
)

// BufferPool is a memory.Allocator for short-lived Arrow buffers: the
// records a writer builds, sorts and encodes, and the Parquet encoder's
// own buffers. Freed buffers are kept by power-of-two size class and
// handed out again, so that a commit does not allocate (and the garbage
// collector does not scan, and the kernel does not fault in) a fresh
// copy of every column of every partition it writes. At most MaxBytes
// are kept; beyond that a freed buffer is left to the collector.
//
// Buffers are 64-byte aligned like memory.GoAllocator's and zeroed when
// handed out. A buffer must not be used after it is freed: records built
// on a pool are for writing, not for keeping (readers use the Go
// allocator).
type BufferPool struct {
	maxBytes int64

	mu    sync.Mutex
	kept  int64
	free  [poolClasses][][]byte
	stats PoolStats
}

// PoolStats counts what a BufferPool did.
type PoolStats struct {
	Allocations int64 // buffers handed out by Allocate or a growing Reallocate
	Reused      int64 // of which came from the pool
	KeptBytes   int64 // bytes in the pool now
}

const (
	poolMinClass = 6  // 64 bytes
	poolMaxClass = 28 // 256 MiB; larger buffers are not pooled
	poolClasses  = poolMaxClass + 1
	poolAlign    = 64
)

// NewBufferPool returns a pool keeping at most maxBytes of freed buffers.
func NewBufferPool(maxBytes int64) *BufferPool {
	return &BufferPool{maxBytes: maxBytes}
}

var _ memory.Allocator = (*BufferPool)(nil)

// poolClass returns the size class of a request of n bytes (n > 0).
func poolClass(n int) int {
	c := bits.Len(uint(n - 1))
	return max(c, poolMinClass)
}

// Allocate returns a zeroed buffer of size bytes.
func (p *BufferPool) Allocate(size int) []byte {
	if size <= 0 {
		return p.alloc(0)
	}
	return p.alloc(size)
}

func (p *BufferPool) alloc(size int) []byte {
	c := poolClass(max(size, 1))
	if c > poolMaxClass {
		return alignedBytes(size, size)
	}
	p.mu.Lock()
	p.stats.Allocations++
	if n := len(p.free[c]); n > 0 {
		b := p.free[c][n-1]
		p.free[c][n-1] = nil
		p.free[c] = p.free[c][:n-1]
		p.kept -= int64(cap(b))
		p.stats.Reused++
		p.mu.Unlock()
		b = b[:size]
		clear(b)
		return b
	}
	p.mu.Unlock()
	return alignedBytes(size, 1<<c)
}

// take returns an empty buffer of capacity at least n that is not zeroed,
// for output written from its start (the Parquet encoder's file); give it
// back with Free. nil for n <= 0.
func (p *BufferPool) take(n int) []byte {
	if n <= 0 {
		return nil
	}
	c := poolClass(n)
	if c > poolMaxClass {
		return make([]byte, 0, n)
	}
	p.mu.Lock()
	p.stats.Allocations++
	if k := len(p.free[c]); k > 0 {
		b := p.free[c][k-1]
		p.free[c][k-1] = nil
		p.free[c] = p.free[c][:k-1]
		p.kept -= int64(cap(b))
		p.stats.Reused++
		p.mu.Unlock()
		return b[:0]
	}
	p.mu.Unlock()
	return alignedBytes(0, 1<<c)
}

// alignedBytes returns a zeroed, 64-byte aligned slice of length size and
// capacity capacity.
func alignedBytes(size, capacity int) []byte {
	buf := make([]byte, capacity+poolAlign)
	shift := 0
	if r := int(addressOf(buf)) % poolAlign; r != 0 {
		shift = poolAlign - r
	}
	return buf[shift : shift+size : shift+capacity]
}

// Reallocate resizes b to size bytes, in place when its capacity allows
// (the bytes it gains are zeroed), else by moving it to a new buffer and
// freeing the old one.
func (p *BufferPool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := p.alloc(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free gives b back to the pool. Buffers the pool did not hand out (their
// capacity is not one of its size classes) are left to the collector.
func (p *BufferPool) Free(b []byte) {
	c := cap(b)
	if c < 1<<poolMinClass || c > 1<<poolMaxClass || c&(c-1) != 0 || int(addressOf(b[:1]))%poolAlign != 0 {
		return
	}
	class := bits.Len(uint(c)) - 1
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept+int64(c) > p.maxBytes {
		return
	}
	p.kept += int64(c)
	p.free[class] = append(p.free[class], b[:0])
}

// Stats returns what the pool did so far.
func (p *BufferPool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.KeptBytes = p.kept
	return s
}

func addressOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
