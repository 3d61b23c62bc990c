package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sentinel errors of the object store. Backends wrap them, so test with
// errors.Is.
var (
	// ErrNotFound: no object is stored under the key.
	ErrNotFound = errors.New("object not found")
	// ErrPreconditionFailed: a conditional put found the object present
	// (IfAbsent) or changed or gone (IfMatch), and wrote nothing.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrInvalidKey: the key (or list prefix) breaks the key rules of
	// ValidateKey.
	ErrInvalidKey = errors.New("invalid object key")
	// ErrKeyConflict: the key would be both an object and a prefix
	// directory of other objects ("a/b" beside "a/b/c"). The local
	// directory refuses such keys; S3 servers differ (MinIO stores both but
	// then lists only one), so callers must never make them.
	ErrKeyConflict = errors.New("object key conflicts with an existing object or prefix")
	// ErrInvalidRange: a ranged read with a negative offset.
	ErrInvalidRange = errors.New("invalid byte range")
	// ErrInvalidPrecondition: a Precondition that is neither IfAbsent nor
	// IfMatch with an ETag.
	ErrInvalidPrecondition = errors.New("invalid precondition")
	// ErrClosed: the bucket has been closed.
	ErrClosed = errors.New("bucket closed")
	// ErrUnavailable: the store could not be reached (connection refused
	// or cut, a network timeout) or answered with a server error (5xx
	// other than a full drive): nothing is wrong with the request, and it
	// may succeed once the store is back. The backend's own error is
	// wrapped too.
	ErrUnavailable = errors.New("object store unavailable")
)

// Attributes describe one version of an object.
type Attributes struct {
	// Size is the length of the whole object in bytes.
	Size int64
	// ETag identifies this version of the object. It is opaque: compare it
	// only for equality, and only with ETags from the same bucket. It
	// changes whenever the content changes; a rewrite with the same content
	// may keep it (S3: an MD5 of the content) or not (local directory). See
	// docs/object-store.md.
	ETag string
	// LastModified is when this version was written.
	LastModified time.Time
}

// Object is an open object: its content (all of it, or the requested
// range) and the attributes of exactly the version being read, so that a
// reader can make a conditional put against what it read. Close it.
type Object struct {
	io.ReadCloser
	Attributes
}

// ObjectInfo is one entry of a listing.
type ObjectInfo struct {
	Key string
	Attributes
}

// BucketReader is the read-only part of Bucket, for readers that never
// write (the reporting API, rollup readers).
type BucketReader interface {
	// Get opens the whole object stored under key, or fails with
	// ErrNotFound.
	Get(ctx context.Context, key string) (*Object, error)
	// GetRange opens length bytes of the object from offset off (length < 0:
	// to the end). A range that reaches past the end is cut short at the
	// end; one that starts at or after the end is empty. Attributes are
	// those of the whole object. A negative off fails with ErrInvalidRange;
	// a missing object with ErrNotFound.
	GetRange(ctx context.Context, key string, off, length int64) (*Object, error)
	// Attributes returns the attributes of the object stored under key, or
	// fails with ErrNotFound.
	Attributes(ctx context.Context, key string) (Attributes, error)
	// List calls fn for every object whose key starts with prefix (any
	// depth: keys are flat, '/' is not special), in ascending byte order of
	// the key. An error from fn stops the listing and is returned as is.
	// Objects written or deleted during a listing may or may not be seen.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
}

// Bucket is mf's object store: a flat namespace of keys ('/'-separated,
// see ValidateKey) mapped to immutable byte strings that are replaced
// whole. No key may also be a prefix directory of another ("a/b" beside
// "a/b/c"; see ErrKeyConflict). Every implementation passes
// storagetest.Acceptance; docs/object-store.md describes the backends.
type Bucket interface {
	BucketReader
	// Put stores everything r yields under key, replacing any object there,
	// and returns the new ETag. The write is atomic: readers see the old
	// object or the new one, never a part. If Put fails, the old object is
	// unchanged.
	Put(ctx context.Context, key string, r io.Reader) (etag string, err error)
	// PutIf is Put that writes only if cond holds at the moment of the
	// write; otherwise it writes nothing and fails with
	// ErrPreconditionFailed. Conditional puts are linearizable: of many
	// racing PutIf(IfAbsent) calls exactly one succeeds, and a chain of
	// read, PutIf(IfMatch(etag read)) never loses an update.
	PutIf(ctx context.Context, key string, r io.Reader, cond Precondition) (etag string, err error)
	// Delete removes the object under key. Deleting a missing object is not
	// an error.
	Delete(ctx context.Context, key string) error
	// Close releases what the bucket holds. Objects already written stay.
	Close() error
}

// Precondition is the condition of a conditional put: build it with
// IfAbsent or IfMatch.
type Precondition struct {
	// Absent: write only if no object is stored under the key
	// (create-only; S3 If-None-Match: *).
	Absent bool
	// ETag: when not empty, write only if the stored object's ETag is this
	// one (compare-and-swap; S3 If-Match). A missing object fails it.
	ETag string
}

// IfAbsent is the precondition of a create-only put.
func IfAbsent() Precondition { return Precondition{Absent: true} }

// IfMatch is the precondition of a compare-and-swap put: the object must
// still be the version with this ETag.
func IfMatch(etag string) Precondition { return Precondition{ETag: etag} }

// Validate reports whether p is usable: exactly one of Absent and ETag.
func (p Precondition) Validate() error {
	switch {
	case p.Absent && p.ETag != "":
		return fmt.Errorf("%w: both IfAbsent and IfMatch(%q) set; use one", ErrInvalidPrecondition, p.ETag)
	case !p.Absent && p.ETag == "":
		return fmt.Errorf("%w: neither IfAbsent nor IfMatch set; use Put for an unconditional write", ErrInvalidPrecondition)
	}
	return nil
}

func (p Precondition) String() string {
	if p.Absent {
		return "if absent"
	}
	return fmt.Sprintf("if ETag is %q", p.ETag)
}

// ReadAll reads the whole object under key into memory, with the
// attributes of the version read. For small objects (manifests, counters);
// stream large ones with Get.
func ReadAll(ctx context.Context, b BucketReader, key string) ([]byte, Attributes, error) {
	obj, err := b.Get(ctx, key)
	if err != nil {
		return nil, Attributes{}, err
	}
	defer obj.Close()
	var buf bytes.Buffer
	buf.Grow(int(min(max(obj.Size, 0), 1<<30)) + bytes.MinRead)
	if _, err := buf.ReadFrom(obj); err != nil {
		return nil, Attributes{}, fmt.Errorf("cannot read object %q: %w", key, err)
	}
	return buf.Bytes(), obj.Attributes, nil
}

// Exists reports whether an object is stored under key.
func Exists(ctx context.Context, b BucketReader, key string) (bool, error) {
	_, err := b.Attributes(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}
