package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Layout of a local bucket directory (docs/object-store.md).
const (
	localFormatFile  = "FORMAT"
	localFormatValue = "mf object store, local directory layout 1\n"
	localObjectsDir  = "objects"
	localTmpDir      = "tmp"
	localLocksDir    = "locks"
	// localLockStripes is how many lock files serialise writers: a key's
	// writers take the lock of stripe fnv32a(key) % localLockStripes.
	localLockStripes = 64
	// localStaleTmp is how long a temporary file may sit untouched before
	// Open removes it as left over from a crash.
	localStaleTmp = time.Hour
	// localPruneRetries bounds how often a put recreates parent directories
	// that a concurrent delete pruned.
	localPruneRetries = 100
)

// localBucket is the local directory backend: every object is a plain file
// under Dir/objects, replaced by rename of a synced temporary file from
// Dir/tmp; writers of a key serialise on an in-process mutex and a flock of
// a lock file under Dir/locks, so conditional puts are linearizable across
// goroutines and processes. See docs/object-store.md.
type localBucket struct {
	root    string
	objects string
	tmp     string
	locks   string
	logger  *slog.Logger

	stripes [localLockStripes]lockStripe
	closed  atomic.Bool
	// lastMtime is the last modification time (Unix ns) given to a written
	// object; each write takes a later one, so that an ETag (mtime, inode,
	// size) does not come back even when the file system reuses an inode.
	lastMtime atomic.Int64
}

// lockStripe is one writer lock: mu orders the goroutines of this process,
// a flock on file orders processes. file is opened on first use.
type lockStripe struct {
	mu   sync.Mutex
	file *os.File
}

var _ Bucket = (*localBucket)(nil)

// openLocal opens (creating when missing) the local bucket rooted at dir.
func openLocal(dir string, logger *slog.Logger) (*localBucket, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot open local object store %q: %w", dir, err)
	}
	b := &localBucket{
		root:    root,
		objects: filepath.Join(root, localObjectsDir),
		tmp:     filepath.Join(root, localTmpDir),
		locks:   filepath.Join(root, localLocksDir),
		logger:  logger,
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("cannot open local object store %q: %w", root, err)
	}
	for _, d := range []string{b.objects, b.tmp, b.locks} {
		if err := mkdirAllSynced(root, d); err != nil {
			return nil, fmt.Errorf("cannot open local object store %q: %w", root, err)
		}
	}
	if err := b.checkFormat(); err != nil {
		return nil, err
	}
	b.removeStaleTmp()
	b.probeTimestamps()
	logger.Info("object store: local directory", "dir", root)
	return b, nil
}

// checkFormat writes the layout marker of a new store and refuses a
// directory marked with another layout.
func (b *localBucket) checkFormat() error {
	path := filepath.Join(b.root, localFormatFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		err = b.writeFormat(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cannot mark local object store %q: %w", b.root, err)
		}
		data, err = os.ReadFile(path) // another process marked it first
	}
	switch {
	case err != nil:
		return fmt.Errorf("cannot read layout marker of local object store: %w", err)
	case string(data) != localFormatValue:
		return fmt.Errorf("cannot open local object store %q: %s holds %q, not %q; this directory was written by another version of mf or is not an mf object store",
			b.root, path, strings.TrimSpace(string(data)), strings.TrimSpace(localFormatValue))
	}
	return nil
}

// writeFormat creates the layout marker whole or not at all: a synced
// temporary file hard-linked into place, which fails if the marker exists.
func (b *localBucket) writeFormat(path string) error {
	f, err := os.CreateTemp(b.tmp, "format-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.WriteString(localFormatValue)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return syncDir(b.root)
}

// removeStaleTmp deletes temporary files that a crashed writer left behind.
// Files touched within localStaleTmp may belong to a live writer of another
// process and stay.
func (b *localBucket) removeStaleTmp() {
	entries, err := os.ReadDir(b.tmp)
	if err != nil {
		b.logger.Warn("object store: cannot list temporary files", "dir", b.tmp, "err", err)
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < localStaleTmp {
			continue
		}
		if err := os.Remove(filepath.Join(b.tmp, e.Name())); err == nil {
			b.logger.Info("object store: removed a temporary file left by a crash", "file", e.Name())
		}
	}
}

// probeTimestamps warns when the file system drops the nanoseconds of
// modification times, which ETags rely on.
func (b *localBucket) probeTimestamps() {
	f, err := os.CreateTemp(b.tmp, "probe-*")
	if err != nil {
		b.logger.Warn("object store: cannot probe timestamp precision", "err", err)
		return
	}
	name := f.Name()
	defer os.Remove(name)
	f.Close()
	want := time.Unix(1_700_000_000, 123_456_789)
	if err := os.Chtimes(name, want, want); err != nil {
		b.logger.Warn("object store: cannot probe timestamp precision", "err", err)
		return
	}
	info, err := os.Stat(name)
	if err != nil {
		b.logger.Warn("object store: cannot probe timestamp precision", "err", err)
		return
	}
	if !info.ModTime().Equal(want) {
		b.logger.Warn("object store: the file system keeps modification times only to "+info.ModTime().Sub(want.Truncate(time.Second)).String()+
			"; ETags may repeat, so conditional puts may miss a change; use ext4, xfs, btrfs, zfs or tmpfs", "dir", b.root)
	}
}

func (b *localBucket) path(key string) string {
	return filepath.Join(b.objects, filepath.FromSlash(key))
}

func (b *localBucket) Get(ctx context.Context, key string) (*Object, error) {
	f, attrs, err := b.open(ctx, key)
	if err != nil {
		return nil, err
	}
	return &Object{ReadCloser: f, Attributes: attrs}, nil
}

func (b *localBucket) GetRange(ctx context.Context, key string, off, length int64) (*Object, error) {
	if off < 0 {
		return nil, fmt.Errorf("cannot read object %q from offset %d: %w", key, off, ErrInvalidRange)
	}
	f, attrs, err := b.open(ctx, key)
	if err != nil {
		return nil, err
	}
	n := max(attrs.Size-off, 0)
	if length >= 0 {
		n = min(n, length)
	}
	return &Object{ReadCloser: sectionReadCloser{io.NewSectionReader(f, off, n), f}, Attributes: attrs}, nil
}

// open opens the object file of key with its attributes.
func (b *localBucket) open(ctx context.Context, key string) (*os.File, Attributes, error) {
	if err := b.usable(ctx, key); err != nil {
		return nil, Attributes{}, fmt.Errorf("cannot read object %q: %w", key, err)
	}
	f, err := os.Open(b.path(key))
	if err != nil {
		if missing(err) {
			return nil, Attributes{}, fmt.Errorf("cannot read object %q: %w", key, ErrNotFound)
		}
		return nil, Attributes{}, fmt.Errorf("cannot read object %q: %w", key, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Attributes{}, fmt.Errorf("cannot read object %q: %w", key, err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, Attributes{}, fmt.Errorf("cannot read object %q: %w", key, ErrNotFound)
	}
	return f, localAttributes(info), nil
}

func (b *localBucket) Attributes(ctx context.Context, key string) (Attributes, error) {
	if err := b.usable(ctx, key); err != nil {
		return Attributes{}, fmt.Errorf("cannot stat object %q: %w", key, err)
	}
	info, err := os.Lstat(b.path(key))
	switch {
	case err != nil && missing(err):
		return Attributes{}, fmt.Errorf("cannot stat object %q: %w", key, ErrNotFound)
	case err != nil:
		return Attributes{}, fmt.Errorf("cannot stat object %q: %w", key, err)
	case !info.Mode().IsRegular():
		return Attributes{}, fmt.Errorf("cannot stat object %q: %w", key, ErrNotFound)
	}
	return localAttributes(info), nil
}

func (b *localBucket) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if b.closed.Load() {
		return fmt.Errorf("cannot list objects under %q: %w", prefix, ErrClosed)
	}
	if err := ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("cannot list objects: %w", err)
	}
	// Start in the deepest directory the prefix names whole.
	dir := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir = prefix[:i]
	}
	return b.walk(ctx, dir, prefix, fn)
}

// walk lists the objects under the key directory dir ("" for the root)
// whose keys start with prefix, in key order. Entries are sorted by name,
// directories as name+"/", which orders the full keys bytewise.
func (b *localBucket) walk(ctx context.Context, dir, prefix string, fn func(ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot list objects under %q: %w", prefix, err)
	}
	entries, err := os.ReadDir(filepath.Join(b.objects, filepath.FromSlash(dir)))
	if err != nil {
		if missing(err) {
			return nil // pruned by a concurrent delete, or never created
		}
		return fmt.Errorf("cannot list objects under %q: %w", prefix, err)
	}
	type entry struct {
		name string // key segment, with '/' appended for directories
		e    fs.DirEntry
	}
	sorted := make([]entry, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		sorted = append(sorted, entry{name, e})
	}
	slices.SortFunc(sorted, func(x, y entry) int { return strings.Compare(x.name, y.name) })
	base := ""
	if dir != "" {
		base = dir + "/"
	}
	for _, se := range sorted {
		key := base + se.name
		if se.e.IsDir() {
			// Descend when keys below may match: the directory lies under
			// the prefix, or the prefix goes on inside it.
			if strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key) {
				if err := b.walk(ctx, strings.TrimSuffix(key, "/"), prefix, fn); err != nil {
					return err
				}
			}
			continue
		}
		if !strings.HasPrefix(key, prefix) || !se.e.Type().IsRegular() {
			continue
		}
		info, err := se.e.Info()
		if err != nil {
			if missing(err) {
				continue // deleted since ReadDir
			}
			return fmt.Errorf("cannot list object %q: %w", key, err)
		}
		if err := fn(ObjectInfo{Key: key, Attributes: localAttributes(info)}); err != nil {
			return err
		}
	}
	return nil
}

func (b *localBucket) Put(ctx context.Context, key string, r io.Reader) (string, error) {
	etag, err := b.put(ctx, key, r, nil)
	if err != nil {
		return "", fmt.Errorf("cannot put object %q: %w", key, err)
	}
	return etag, nil
}

func (b *localBucket) PutIf(ctx context.Context, key string, r io.Reader, cond Precondition) (string, error) {
	if err := cond.Validate(); err != nil {
		return "", fmt.Errorf("cannot put object %q: %w", key, err)
	}
	etag, err := b.put(ctx, key, r, &cond)
	if err != nil {
		return "", fmt.Errorf("cannot put object %q %s: %w", key, cond, err)
	}
	return etag, nil
}

// put writes r to a synced temporary file, then, under the key's lock,
// checks cond (nil: none) and renames the file into place.
func (b *localBucket) put(ctx context.Context, key string, r io.Reader, cond *Precondition) (string, error) {
	if err := b.usable(ctx, key); err != nil {
		return "", err
	}
	tmp, etag, err := b.writeTemp(ctx, r)
	if err != nil {
		return "", err
	}
	path := b.path(key)
	unlock, err := b.lock(key)
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	err = b.checkAndRename(tmp, path, cond)
	unlock()
	if err != nil {
		os.Remove(tmp) // not renamed: no object changed
		return "", err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("object written but not yet durable: %w", err)
	}
	return etag, nil
}

// writeTemp copies r into a new temporary file, gives it a fresh
// modification time, syncs and closes it, and returns its path and the
// ETag it will have once renamed.
func (b *localBucket) writeTemp(ctx context.Context, r io.Reader) (path, etag string, err error) {
	f, err := os.CreateTemp(b.tmp, "put-*")
	if err != nil {
		return "", "", fmt.Errorf("cannot create temporary file: %w", err)
	}
	name := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(name)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return "", "", fmt.Errorf("cannot write temporary file: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	mtime := b.nextMtime()
	if err := os.Chtimes(name, mtime, mtime); err != nil {
		return "", "", fmt.Errorf("cannot set modification time of temporary file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", "", fmt.Errorf("cannot sync temporary file: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		return "", "", fmt.Errorf("cannot stat temporary file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", "", fmt.Errorf("cannot close temporary file: %w", err)
	}
	return name, localAttributes(info).ETag, nil
}

// nextMtime returns the current time, or 1 ns after the last time it
// returned if the clock has not moved on since.
func (b *localBucket) nextMtime() time.Time {
	for {
		last := b.lastMtime.Load()
		next := max(time.Now().UnixNano(), last+1)
		if b.lastMtime.CompareAndSwap(last, next) {
			return time.Unix(0, next)
		}
	}
}

// checkAndRename runs under the key's lock: it checks cond against the
// object at path and renames tmp over it.
func (b *localBucket) checkAndRename(tmp, path string, cond *Precondition) error {
	if cond != nil {
		info, err := os.Lstat(path)
		var exists bool
		switch {
		case err == nil && info.Mode().IsRegular():
			exists = true
		case err == nil && info.IsDir():
			exists = false // a prefix of other keys; the rename below decides
		case err == nil:
			return fmt.Errorf("%s is neither a file nor a directory", path)
		case errors.Is(err, syscall.ENOTDIR):
			return ErrKeyConflict // a parent segment is an object
		case !missing(err):
			return err
		}
		switch {
		case cond.Absent && exists:
			return ErrPreconditionFailed
		case !cond.Absent && !exists:
			return fmt.Errorf("%w: the object does not exist", ErrPreconditionFailed)
		case !cond.Absent && localAttributes(info).ETag != cond.ETag:
			return fmt.Errorf("%w: the object has ETag %q", ErrPreconditionFailed, localAttributes(info).ETag)
		}
	}
	for range localPruneRetries {
		if err := mkdirAllSynced(b.objects, filepath.Dir(path)); err != nil {
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
				return ErrKeyConflict
			}
			return err
		}
		err := os.Rename(tmp, path)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.ENOENT):
			continue // a concurrent delete pruned the parent; make it again
		case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
			// path is a directory: an empty one (left by a crash) may go;
			// one with objects below makes key a prefix of other keys.
			if rmErr := os.Remove(path); rmErr != nil {
				return ErrKeyConflict
			}
			continue
		case errors.Is(err, syscall.ENOTDIR):
			return ErrKeyConflict
		default:
			return err
		}
	}
	return fmt.Errorf("cannot create the parent directories of %s: they were removed %d times in a row", path, localPruneRetries)
}

func (b *localBucket) Delete(ctx context.Context, key string) error {
	if err := b.usable(ctx, key); err != nil {
		return fmt.Errorf("cannot delete object %q: %w", key, err)
	}
	path := b.path(key)
	unlock, err := b.lock(key)
	if err != nil {
		return fmt.Errorf("cannot delete object %q: %w", key, err)
	}
	info, err := os.Lstat(path)
	if err != nil || info.IsDir() {
		unlock()
		if err == nil || missing(err) {
			return nil // nothing stored under key
		}
		return fmt.Errorf("cannot delete object %q: %w", key, err)
	}
	err = os.Remove(path)
	unlock()
	if err != nil && !missing(err) {
		return fmt.Errorf("cannot delete object %q: %w", key, err)
	}
	if err := b.syncRemoval(filepath.Dir(path)); err != nil {
		return fmt.Errorf("object %q deleted but not yet durable: %w", key, err)
	}
	b.prune(filepath.Dir(path))
	return nil
}

// syncRemoval makes a removal from dir durable: it syncs dir, or, when a
// concurrent delete already pruned dir (emptied, it went with its last
// object), the nearest ancestor that still exists, which holds that
// removal.
func (b *localBucket) syncRemoval(dir string) error {
	for {
		err := syncDir(dir)
		if err == nil || !missing(err) || dir == b.objects || !strings.HasPrefix(dir, b.objects+string(filepath.Separator)) {
			return err
		}
		dir = filepath.Dir(dir)
	}
}

// prune removes dir and its parents below the objects directory while they
// are empty. A put that loses its parent to this recreates it.
func (b *localBucket) prune(dir string) {
	for dir != b.objects && strings.HasPrefix(dir, b.objects+string(filepath.Separator)) {
		if err := os.Remove(dir); err != nil {
			return // not empty (or gone): stop
		}
		dir = filepath.Dir(dir)
	}
}

// lock takes the writer lock of key; the returned function releases it.
func (b *localBucket) lock(key string) (func(), error) {
	i := fnv32a(key) % localLockStripes
	s := &b.stripes[i]
	s.mu.Lock()
	if b.closed.Load() {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.file == nil {
		f, err := os.OpenFile(filepath.Join(b.locks, strconv.Itoa(int(i))), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("cannot open lock file: %w", err)
		}
		s.file = f
	}
	fd := int(s.file.Fd())
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX)
		if err == nil {
			break
		}
		if err != syscall.EINTR {
			s.mu.Unlock()
			return nil, fmt.Errorf("cannot lock %s: %w", s.file.Name(), err)
		}
	}
	return func() {
		// Unlocking a held flock cannot fail; closing the file would
		// release it too.
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		s.mu.Unlock()
	}, nil
}

func (b *localBucket) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	var errs []error
	for i := range b.stripes {
		s := &b.stripes[i]
		s.mu.Lock()
		if s.file != nil {
			errs = append(errs, s.file.Close())
			s.file = nil
		}
		s.mu.Unlock()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cannot close local object store %q: %w", b.root, err)
	}
	return nil
}

// usable checks what every operation on key checks first.
func (b *localBucket) usable(ctx context.Context, key string) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if err := ValidateKey(key); err != nil {
		return err
	}
	return ctx.Err()
}

// localAttributes derives the attributes of a stored file. The ETag joins
// modification time (ns), inode and size: a put always writes a new inode
// with a modification time later than any this process gave before.
func localAttributes(info fs.FileInfo) Attributes {
	var ino uint64
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	mtime := info.ModTime()
	return Attributes{
		Size:         info.Size(),
		ETag:         strconv.FormatInt(mtime.UnixNano(), 16) + "-" + strconv.FormatUint(ino, 16) + "-" + strconv.FormatInt(info.Size(), 16),
		LastModified: mtime,
	}
}

// missing reports whether err means that a path does not exist, including
// that one of its parents is a file.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

type sectionReadCloser struct {
	*io.SectionReader
	io.Closer
}

// mkdirAllSynced creates dir and its missing parents below root, syncing
// each parent whose entries changed so the new directories survive a crash.
func mkdirAllSynced(root, dir string) error {
	info, err := os.Stat(dir)
	if err == nil {
		if !info.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if dir != root && parent != dir {
		if err := mkdirAllSynced(root, parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Made by a concurrent writer, or a file is in the way.
			if info, serr := os.Stat(dir); serr == nil && info.IsDir() {
				return nil
			}
		}
		return err
	}
	return syncDir(parent)
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// fnv32a is the 32-bit FNV-1a hash of s (hash/fnv without the allocation).
func fnv32a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
