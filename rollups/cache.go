package rollups

import (
	"container/list"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"
)

// cache is a least-recently-used cache bounded in bytes. Values are
// immutable (data files never change), so entries never go stale; they
// only leave when room is needed. Arrays are reference counted: the cache
// holds one reference, and get hands out another that the caller
// releases.
type cache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	lru   *list.List // front: most recently used
	items map[string]*list.Element

	hits, misses, evictions int64
}

type cacheEntry struct {
	key  string
	val  any // arrow.Array or *fileInfo
	size int64
}

func newCache(limit int64) *cache {
	return &cache{limit: limit, lru: list.New(), items: map[string]*list.Element{}}
}

// get returns the value under key (an arrow.Array comes retained).
func (c *cache) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	if a, ok := e.val.(arrow.Array); ok {
		a.Retain()
	}
	return e.val, true
}

// put stores val (size bytes) under key, evicting the least recently used
// entries to make room. A value larger than the whole cache is not kept.
// The cache retains an arrow.Array it keeps.
func (c *cache) put(key string, val any, size int64) {
	if size > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return // a concurrent load stored the same immutable value
	}
	if a, ok := val.(arrow.Array); ok {
		a.Retain()
	}
	c.items[key] = c.lru.PushFront(&cacheEntry{key: key, val: val, size: size})
	c.size += size
	for c.size > c.limit {
		el := c.lru.Back()
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.items, e.key)
		c.size -= e.size
		c.evictions++
		if a, ok := e.val.(arrow.Array); ok {
			a.Release()
		}
	}
}

// arraySize is the memory held by an array's buffers.
func arraySize(a arrow.Array) int64 {
	var n int64
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		for _, c := range d.Children() {
			walk(c)
		}
	}
	walk(a.Data())
	return n + 64
}
