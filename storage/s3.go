package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// s3PartSize is the part size of multipart uploads, and so about the most
// memory an upload buffers: a stream of unknown length is read up to one
// part ahead to find out whether a single request will do, and minio-go
// buffers one part of streams that are not files. 16 MiB parts allow
// objects up to 156 GiB.
const s3PartSize = 16 << 20

// s3Location is a parsed --store URL.
type s3Location struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	Bucket    string
	Secure    bool   // https
	Region    string // "" lets the client ask the server
}

// parseS3URL parses s3://ACCESS:SECRET@host:port/bucket?secure=false&region=R.
// Errors never contain the secret.
func parseS3URL(raw string) (s3Location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the input, secret included: do not wrap it.
		return s3Location{}, errors.New("store URL is not a URL; the form is s3://ACCESS:SECRET@host:port/bucket?secure=false (percent-encode special characters in the keys)")
	}
	redacted := u.Redacted()
	if u.Scheme != "s3" {
		return s3Location{}, fmt.Errorf("store URL %q: scheme %q is not supported; the form is s3://ACCESS:SECRET@host:port/bucket?secure=false", redacted, u.Scheme)
	}
	loc := s3Location{Endpoint: u.Host, Secure: true}
	if u.Host == "" || u.Hostname() == "" {
		return s3Location{}, fmt.Errorf("store URL %q has no host; the form is s3://ACCESS:SECRET@host:port/bucket", redacted)
	}
	if u.User != nil {
		loc.AccessKey = u.User.Username()
		loc.SecretKey, _ = u.User.Password()
	}
	if (loc.AccessKey == "") != (loc.SecretKey == "") {
		return s3Location{}, fmt.Errorf("store URL %q lacks the access key or the secret key; the form is s3://ACCESS:SECRET@host:port/bucket, or without both keys to take them from the environment", redacted)
	}
	loc.Bucket = strings.TrimPrefix(u.Path, "/")
	if err := s3utils.CheckValidBucketNameStrict(loc.Bucket); err != nil {
		return s3Location{}, fmt.Errorf("store URL %q: bucket name %q is not valid (%v); use 3 to 63 lower-case letters, digits, '-' and '.'", redacted, loc.Bucket, err)
	}
	for name, values := range u.Query() {
		value := values[len(values)-1]
		switch name {
		case "secure":
			secure, err := strconv.ParseBool(value)
			if err != nil {
				return s3Location{}, fmt.Errorf("store URL %q: secure=%q is not true or false", redacted, value)
			}
			loc.Secure = secure
		case "region":
			loc.Region = value
		default:
			return s3Location{}, fmt.Errorf("store URL %q: unknown parameter %q; known are secure and region", redacted, name)
		}
	}
	return loc, nil
}

// chainCredentials are the keys of a store URL that has none, found the
// way AWS and MinIO clients find them: the variables AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), then MINIO_ROOT_USER and
// MINIO_ROOT_PASSWORD (or MINIO_ACCESS_KEY, MINIO_SECRET_KEY), then
// ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE), then
// ~/.mc/config.json, then the machine's IAM role (EC2 instance profile,
// ECS task role, web identity). Finding none is an error: mf writes.
func chainCredentials(loc s3Location) (*credentials.Credentials, error) {
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.EnvMinio{},
		&credentials.FileAWSCredentials{},
		&credentials.FileMinioClient{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}},
	})
	v, err := creds.GetWithContext(&credentials.CredContext{Client: &http.Client{Transport: http.DefaultTransport}})
	if err != nil || v.SignerType.IsAnonymous() || v.AccessKeyID == "" {
		return nil, fmt.Errorf("S3 store at %s: the URL has no keys and none were found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, MINIO_ROOT_USER and MINIO_ROOT_PASSWORD, ~/.aws/credentials, ~/.mc/config.json, an IAM role)", loc.Endpoint)
	}
	return creds, nil
}

// s3Bucket is the S3 backend (MinIO or any S3 with conditional writes)
// through minio-go.
type s3Bucket struct {
	core   minio.Core
	bucket string
}

var _ Bucket = (*s3Bucket)(nil)

// openS3 connects to the store at loc and creates its bucket if missing.
func openS3(ctx context.Context, loc s3Location, logger *slog.Logger) (*s3Bucket, error) {
	creds := credentials.NewStaticV4(loc.AccessKey, loc.SecretKey, "")
	if loc.AccessKey == "" {
		var err error
		if creds, err = chainCredentials(loc); err != nil {
			return nil, err
		}
	}
	client, err := minio.New(loc.Endpoint, &minio.Options{
		Creds:  creds,
		Secure: loc.Secure,
		Region: loc.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot open S3 store at %s: %w", loc.Endpoint, err)
	}
	b := &s3Bucket{core: minio.Core{Client: client}, bucket: loc.Bucket}
	exists, err := client.BucketExists(ctx, loc.Bucket)
	if err != nil {
		return nil, fmt.Errorf("cannot open S3 bucket %q at %s: %w", loc.Bucket, loc.Endpoint, err)
	}
	if !exists {
		err := client.MakeBucket(ctx, loc.Bucket, minio.MakeBucketOptions{Region: loc.Region})
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			err = nil // created by a concurrent process
		}
		if err != nil {
			return nil, fmt.Errorf("cannot create S3 bucket %q at %s: %w", loc.Bucket, loc.Endpoint, err)
		}
		logger.Info("object store: created S3 bucket", "endpoint", loc.Endpoint, "bucket", loc.Bucket)
	}
	logger.Info("object store: S3", "endpoint", loc.Endpoint, "bucket", loc.Bucket, "secure", loc.Secure)
	return b, nil
}

func (b *s3Bucket) Get(ctx context.Context, key string) (*Object, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("cannot read object %q: %w", key, err)
	}
	body, info, _, err := b.core.GetObject(ctx, b.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot read object %q: %w", key, s3Error(err, nil))
	}
	return &Object{ReadCloser: body, Attributes: s3Attributes(info)}, nil
}

func (b *s3Bucket) GetRange(ctx context.Context, key string, off, length int64) (*Object, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("cannot read object %q: %w", key, err)
	}
	if off < 0 {
		return nil, fmt.Errorf("cannot read object %q from offset %d: %w", key, off, ErrInvalidRange)
	}
	if length == 0 {
		return b.emptyRange(ctx, key)
	}
	var opts minio.GetObjectOptions
	if length > math.MaxInt64-off {
		length = -1 // to the end
	}
	switch {
	case length > 0:
		err := opts.SetRange(off, off+length-1)
		if err != nil {
			return nil, fmt.Errorf("cannot read object %q from offset %d: %w", key, off, err)
		}
	case off > 0:
		err := opts.SetRange(off, 0)
		if err != nil {
			return nil, fmt.Errorf("cannot read object %q from offset %d: %w", key, off, err)
		}
	}
	body, info, header, err := b.core.GetObject(ctx, b.bucket, key, opts)
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.InvalidRange {
			return b.emptyRange(ctx, key) // starts at or after the end
		}
		return nil, fmt.Errorf("cannot read object %q: %w", key, s3Error(err, nil))
	}
	attrs := s3Attributes(info)
	if total, ok := contentRangeTotal(header.Get("Content-Range")); ok {
		attrs.Size = total
	}
	return &Object{ReadCloser: body, Attributes: attrs}, nil
}

// emptyRange answers a range with no bytes in it: the attributes, no body.
func (b *s3Bucket) emptyRange(ctx context.Context, key string) (*Object, error) {
	attrs, err := b.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &Object{ReadCloser: io.NopCloser(bytes.NewReader(nil)), Attributes: attrs}, nil
}

// contentRangeTotal returns the complete length of "bytes 0-9/100".
func contentRangeTotal(h string) (int64, bool) {
	_, total, ok := strings.Cut(h, "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return n, err == nil
}

func (b *s3Bucket) Attributes(ctx context.Context, key string) (Attributes, error) {
	if err := ValidateKey(key); err != nil {
		return Attributes{}, fmt.Errorf("cannot stat object %q: %w", key, err)
	}
	info, err := b.core.Client.StatObject(ctx, b.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Attributes{}, fmt.Errorf("cannot stat object %q: %w", key, s3Error(err, nil))
	}
	return s3Attributes(info), nil
}

func (b *s3Bucket) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("cannot list objects: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objects := b.core.Client.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true})
	for info := range objects {
		if info.Err != nil {
			cancel()
			for range objects {
			}
			return fmt.Errorf("cannot list objects under %q: %w", prefix, s3Error(info.Err, nil))
		}
		if err := fn(ObjectInfo{Key: info.Key, Attributes: s3Attributes(info)}); err != nil {
			cancel()
			for range objects { // let the lister goroutine end
			}
			return err
		}
	}
	return nil
}

func (b *s3Bucket) Put(ctx context.Context, key string, r io.Reader) (string, error) {
	etag, err := b.put(ctx, key, r, nil)
	if err != nil {
		return "", fmt.Errorf("cannot put object %q: %w", key, err)
	}
	return etag, nil
}

func (b *s3Bucket) PutIf(ctx context.Context, key string, r io.Reader, cond Precondition) (string, error) {
	if err := cond.Validate(); err != nil {
		return "", fmt.Errorf("cannot put object %q: %w", key, err)
	}
	etag, err := b.put(ctx, key, r, &cond)
	if err != nil {
		return "", fmt.Errorf("cannot put object %q %s: %w", key, cond, err)
	}
	return etag, nil
}

func (b *s3Bucket) put(ctx context.Context, key string, r io.Reader, cond *Precondition) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: s3PartSize}
	if cond != nil {
		if cond.Absent {
			opts.SetMatchETagExcept("*")
		} else {
			opts.SetMatchETag(cond.ETag)
		}
	}
	r, size := sizedReader(r)
	if size < 0 {
		// Of unknown length: read up to a part to learn whether one
		// request will do, as minio-go would otherwise always upload in
		// parts (three requests even for a few bytes).
		head, full, err := readHead(r, s3PartSize)
		if err != nil {
			return "", fmt.Errorf("cannot read the content: %w", err)
		}
		if full {
			r = io.MultiReader(bytes.NewReader(head), r)
		} else {
			r, size = bytes.NewReader(head), int64(len(head))
		}
	}
	info, err := b.core.Client.PutObject(ctx, b.bucket, key, r, size, opts)
	if err != nil {
		return "", s3Error(err, cond)
	}
	return info.ETag, nil
}

// readHead reads r until EOF or until it has limit bytes (full), growing
// its buffer as the data comes, never beyond limit.
func readHead(r io.Reader, limit int) (head []byte, full bool, err error) {
	buf := make([]byte, 0, min(limit, 64<<10))
	for {
		if len(buf) >= limit {
			return buf, true, nil
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), limit-len(buf)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, false, nil
		case err != nil:
			return nil, false, err
		}
	}
}

// sizedReader returns r, or a reader of the same bytes, with the number of
// bytes it will yield, or -1 if that is unknown.
func sizedReader(r io.Reader) (io.Reader, int64) {
	switch sr := r.(type) {
	case interface{ Len() int }: // bytes.Reader, bytes.Buffer, strings.Reader
		return r, int64(sr.Len())
	case *os.File:
		info, err := sr.Stat()
		if err != nil || !info.Mode().IsRegular() {
			return r, -1
		}
		pos, err := sr.Seek(0, io.SeekCurrent)
		if err != nil {
			return r, -1
		}
		// minio-go reads files with ReadAt from offset 0; a section starts
		// where the caller left the file.
		return io.NewSectionReader(sr, pos, info.Size()-pos), info.Size() - pos
	}
	return r, -1
}

func (b *s3Bucket) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("cannot delete object %q: %w", key, err)
	}
	if err := b.core.RemoveObject(ctx, b.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		err = s3Error(err, nil)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return fmt.Errorf("cannot delete object %q: %w", key, err)
	}
	return nil
}

func (b *s3Bucket) Close() error {
	return nil // minio-go holds only idle HTTP connections
}

// s3Error maps an S3 error to the package's sentinels, keeping the S3
// message. cond is the precondition of the request, if any.
func s3Error(err error, cond *Precondition) error {
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == "" && resp.StatusCode == 0:
		// Not an S3 error response: the network, or the caller's context.
		if unreachable(err) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	case slices.Contains([]int{http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout}, resp.StatusCode):
		// The server failed (MinIO starting or without quorum of its
		// drives, a gateway in front of it): not the request's fault.
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case resp.StatusCode == http.StatusPreconditionFailed || resp.Code == minio.PreconditionFailed:
		return fmt.Errorf("%w: %s", ErrPreconditionFailed, resp.Message)
	case resp.StatusCode == http.StatusConflict && cond != nil && resp.Code == "ConditionalRequestConflict":
		// AWS: a concurrent conditional write won; re-read and retry.
		return fmt.Errorf("%w: %s", ErrPreconditionFailed, resp.Message)
	case resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket):
		if cond != nil {
			// If-Match on a missing object: the version the caller
			// expected is gone.
			return fmt.Errorf("%w: the object does not exist", ErrPreconditionFailed)
		}
		return ErrNotFound
	case resp.Code == "XMinioParentIsObject" || resp.Code == "XMinioObjectExistsAsDirectory":
		// Older MinIO releases refuse a key that is also a prefix.
		return fmt.Errorf("%w: %s", ErrKeyConflict, resp.Message)
	}
	return err
}

// unreachable reports whether err says the store could not be reached:
// a network error (minio-go wraps them in *url.Error), but not the
// caller's canceling.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

func s3Attributes(info minio.ObjectInfo) Attributes {
	return Attributes{Size: info.Size, ETag: info.ETag, LastModified: info.LastModified}
}
