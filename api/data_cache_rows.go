package api

import (
	"container/list"
	"sync"
)

// rowCache is the reporting data layer's cache of decoded day partitions
// (data_days.go): least recently used first out, bounded in bytes
// (ReportingConfig.CacheBytes) and shared by every project. Values are
// immutable once stored. A value larger than the whole budget is not kept:
// the request that read it still uses it (its pins, data_days.go) and
// drops it when it ends. A request never evicts what it read itself:
// when the budget is smaller than a request's days, it stops adding to the
// cache instead of cycling through it, so that the next request still
// finds the days that fitted (a scan larger than an LRU cache would
// otherwise evict every entry before it is used again).
type rowCache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	lru   *list.List // front: most recently used
	items map[string]*list.Element

	hits, misses, evictions, refused int64
}

type rowEntry struct {
	key   string
	val   any
	size  int64
	owner any // the request that last read or stored it
}

func newRowCache(limit int64) *rowCache {
	return &rowCache{limit: limit, lru: list.New(), items: map[string]*list.Element{}}
}

// get returns the value under key, read by owner (a request).
func (c *rowCache) get(key string, owner any) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.lru.MoveToFront(el)
	e := el.Value.(*rowEntry)
	e.owner = owner
	return e.val, true
}

// peek returns the value under key without counting a lookup or making it
// recently used.
func (c *rowCache) peek(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		return el.Value.(*rowEntry).val, true
	}
	return nil, false
}

// put stores val (size bytes) under key for owner (a request), evicting
// the least recently used entries of other requests to make room; when
// only the owner's own entries could make room, val is not kept. It
// reports whether val was kept.
func (c *rowCache) put(key string, val any, size int64, owner any) bool {
	if size > c.limit {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return true // a concurrent read stored the same value
	}
	free := c.limit - c.size
	for el := c.lru.Back(); free < size && el != nil; el = el.Prev() {
		e := el.Value.(*rowEntry)
		if owner != nil && e.owner == owner {
			c.refused++
			return false
		}
		free += e.size
	}
	for c.size+size > c.limit {
		c.drop(c.lru.Back())
		c.evictions++
	}
	c.items[key] = c.lru.PushFront(&rowEntry{key: key, val: val, size: size, owner: owner})
	c.size += size
	return true
}

// remove drops the value under key, if any (a superseded resolution).
func (c *rowCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.drop(el)
	}
}

func (c *rowCache) drop(el *list.Element) {
	e := el.Value.(*rowEntry)
	c.lru.Remove(el)
	delete(c.items, e.key)
	c.size -= e.size
}

// RowCacheStats are the counters of the data layer's cache.
type RowCacheStats struct {
	// Limit is the budget and Bytes what the cache holds now; Entries is
	// the number of decoded partitions it holds.
	Limit, Bytes, Entries int64
	// Hits, Misses and Evictions count lookups and entries dropped for
	// room since start; Refused counts partitions not kept because only
	// the reading request's own entries could have made room.
	Hits, Misses, Evictions, Refused int64
}

func (c *rowCache) stats() RowCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return RowCacheStats{Limit: c.limit, Bytes: c.size, Entries: int64(len(c.items)), Hits: c.hits, Misses: c.misses, Evictions: c.evictions, Refused: c.refused}
}
