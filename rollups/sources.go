package rollups

import "sync"

// fileSources shares, within one scan, a data file fetched whole among
// the row groups the scan reads of it: a file up to
// ReaderConfig.WholeFileBytes is fetched with one request, and without
// sharing every row group's load fetched (and allocated) the whole file
// again: a day of events in 8,192-row groups is read a dozen times. A
// file's bytes are let go when the last row group the scan expects of it
// is loaded. A nil *fileSources shares nothing.
type fileSources struct {
	mu sync.Mutex
	m  map[string]*sharedSource
}

type sharedSource struct {
	once sync.Once
	src  *parquetSource
	err  error
	left int // row groups still to load
}

// expect records that the scan will load n row groups of file key.
func (s *fileSources) expect(key string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*sharedSource{}
	}
	e := s.m[key]
	if e == nil {
		e = &sharedSource{}
		s.m[key] = e
	}
	e.left += n
}

// shared returns the source of file key shared by the scan (a reader of
// its own over the file's bytes), opened with open by the first row group
// to need it; false when the scan does not share the file (nil s, or a
// file it did not expect).
func (s *fileSources) shared(key string, open func() (*parquetSource, error)) (*parquetSource, bool, error) {
	if s == nil {
		return nil, false, nil
	}
	s.mu.Lock()
	e := s.m[key]
	s.mu.Unlock()
	if e == nil {
		return nil, false, nil
	}
	e.once.Do(func() { e.src, e.err = open() })
	if e.err != nil {
		return nil, true, e.err
	}
	return e.src.fork(), true, nil
}

// done records that a row group of file key was loaded.
func (s *fileSources) done(key string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[key]; e != nil {
		if e.left--; e.left <= 0 {
			delete(s.m, key)
		}
	}
}
