package enrich

import (
	"sync"
)

// cacheShards is how many independently locked parts a uaCache has, so that
// concurrent requests rarely wait on each other.
const cacheShards = 16

// uaCache is a bounded, concurrency-safe map from a 64-bit key to a value,
// evicting roughly the least recently used entries.
//
// Each shard keeps two generations: recent and old. Lookups hit recent
// under a read lock; an entry found in old is moved to recent. When recent
// is full, old is dropped whole and recent becomes old. So a shard holds at
// most 2×genCap entries, every entry used within the last genCap inserts
// survives, and hits never allocate. This is the "two-generation" (or
// segmented) approximation of LRU: no per-entry list, so no pointer
// chasing or allocation per entry beyond the map slot.
type uaCache[V any] struct {
	genCap int
	shards [cacheShards]cacheShard[V]
}

type cacheShard[V any] struct {
	mu     sync.RWMutex
	recent map[uint64]V
	old    map[uint64]V
}

// newUACache returns a cache that holds at most about maxEntries entries
// (rounded up to a multiple of 2×cacheShards).
func newUACache[V any](maxEntries int) *uaCache[V] {
	genCap := max((maxEntries+2*cacheShards-1)/(2*cacheShards), 1)
	c := &uaCache[V]{genCap: genCap}
	for i := range c.shards {
		c.shards[i].recent = make(map[uint64]V, genCap)
	}
	return c
}

func (c *uaCache[V]) shard(key uint64) *cacheShard[V] {
	return &c.shards[key>>60&(cacheShards-1)]
}

// get returns the value cached under key.
func (c *uaCache[V]) get(key uint64) (V, bool) {
	s := c.shard(key)
	s.mu.RLock()
	v, ok := s.recent[key]
	s.mu.RUnlock()
	if ok {
		return v, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.recent[key]; ok {
		return v, true
	}
	v, ok = s.old[key]
	if ok {
		delete(s.old, key)
		s.putLocked(c.genCap, key, v)
	}
	return v, ok
}

// put caches v under key.
func (c *uaCache[V]) put(key uint64, v V) {
	s := c.shard(key)
	s.mu.Lock()
	s.putLocked(c.genCap, key, v)
	s.mu.Unlock()
}

func (s *cacheShard[V]) putLocked(genCap int, key uint64, v V) {
	if _, ok := s.recent[key]; !ok && len(s.recent) >= genCap {
		s.old = s.recent
		s.recent = make(map[uint64]V, genCap)
	}
	s.recent[key] = v
}

// len returns the number of entries held (for tests).
func (c *uaCache[V]) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.recent) + len(s.old)
		s.mu.RUnlock()
	}
	return n
}
