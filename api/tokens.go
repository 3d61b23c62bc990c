package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/mfhq/mf/storage"
)

// App tokens (docs/reporting-api.md, "App tokens"): an access token is
// stateless, mf_oat_<payload>.<tag>, the payload naming the user, the app
// and the expiry, the tag an HMAC-SHA256 under a key derived from the
// installation's secret. A refresh token is 32 random bytes, mf_ort_<…>,
// kept in the object store only as its SHA-256 under reporting/refresh/,
// single use: refreshing marks it used with a compare-and-swap put and
// issues a new pair.

const (
	accessTokenPrefix  = "mf_oat_"
	refreshTokenPrefix = "mf_ort_"
	refreshPrefix      = "reporting/refresh/"
	maxTokenLen        = 1024
)

var reAppName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// AppTokens is what IssueAppTokens and RefreshAppTokens hand out.
type AppTokens struct {
	AccessToken      string    `json:"accessToken"`
	AccessExpiresAt  time.Time `json:"accessExpiresAt"`
	RefreshToken     string    `json:"refreshToken"`
	RefreshExpiresAt time.Time `json:"refreshExpiresAt"`
}

type accessPayload struct {
	User    string `json:"u"`
	App     string `json:"a"`
	Expires int64  `json:"e"` // unix seconds
}

// refreshRecord is the stored form of a refresh token.
type refreshRecord struct {
	User      string    `json:"user"`
	App       string    `json:"app"`
	IssuedAt  time.Time `json:"issuedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Used is set when the token has been exchanged; a used token is
	// refused.
	Used bool `json:"used"`
	// Revoked is set by RevokeAppRefreshToken.
	Revoked bool `json:"revoked"`
}

// IssueAppTokens issues an access token (AccessTokenTTL) and a refresh
// token (RefreshTokenTTL) that let app read the reporting API as user. An
// unknown user fails with an error wrapping ErrNotFound, a malformed app
// name with one wrapping ErrRefused.
func (r *Reporting) IssueAppTokens(ctx context.Context, user, app string) (AppTokens, error) {
	if !reAppName.MatchString(app) {
		return AppTokens{}, fmt.Errorf("cannot issue app tokens: %w: the app name must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrRefused)
	}
	if _, ok := r.deps.Catalog.State().User(user); !ok {
		return AppTokens{}, fmt.Errorf("cannot issue app tokens: %w: no user %q in the catalog", ErrNotFound, user)
	}
	return r.issue(ctx, user, app)
}

func (r *Reporting) issue(ctx context.Context, user, app string) (AppTokens, error) {
	now := r.deps.Clock()
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return AppTokens{}, fmt.Errorf("cannot issue app tokens: %w", err)
	}
	refresh := refreshTokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	rec := refreshRecord{User: user, App: app, IssuedAt: now.UTC(), ExpiresAt: now.Add(r.cfg.RefreshTokenTTL).UTC()}
	body, err := json.Marshal(rec)
	if err != nil {
		return AppTokens{}, fmt.Errorf("cannot issue app tokens: %w", err)
	}
	key := refreshPrefix + refreshHash(refresh)
	if _, err := r.deps.Bucket.PutIf(ctx, key, bytes.NewReader(body), storage.IfAbsent()); err != nil {
		return AppTokens{}, fmt.Errorf("cannot store the refresh token %q: %w", key, err)
	}
	exp := now.Add(r.cfg.AccessTokenTTL)
	return AppTokens{
		AccessToken:      r.sealAccess(accessPayload{User: user, App: app, Expires: exp.Unix()}),
		AccessExpiresAt:  time.Unix(exp.Unix(), 0).UTC(),
		RefreshToken:     refresh,
		RefreshExpiresAt: rec.ExpiresAt,
	}, nil
}

// RefreshAppTokens exchanges a refresh token for a new pair. The refresh
// token is single use. A token that is unknown, used, revoked, expired, or
// whose user left the catalog fails with an error wrapping ErrRefused.
func (r *Reporting) RefreshAppTokens(ctx context.Context, refresh string) (AppTokens, error) {
	rec, etag, key, err := r.readRefresh(ctx, refresh)
	if err != nil {
		return AppTokens{}, err
	}
	now := r.deps.Clock()
	switch {
	case rec.Used:
		return AppTokens{}, fmt.Errorf("cannot refresh app tokens: %w: the refresh token was already used", ErrRefused)
	case rec.Revoked:
		return AppTokens{}, fmt.Errorf("cannot refresh app tokens: %w: the refresh token was revoked", ErrRefused)
	case !now.Before(rec.ExpiresAt):
		return AppTokens{}, fmt.Errorf("cannot refresh app tokens: %w: the refresh token expired at %s", ErrRefused, rec.ExpiresAt.Format(time.RFC3339))
	}
	if _, ok := r.deps.Catalog.State().User(rec.User); !ok {
		return AppTokens{}, fmt.Errorf("cannot refresh app tokens: %w: user %q is no longer in the catalog", ErrRefused, rec.User)
	}
	rec.Used = true
	if err := r.writeRefresh(ctx, key, etag, rec); err != nil {
		if errors.Is(err, storage.ErrPreconditionFailed) {
			return AppTokens{}, fmt.Errorf("cannot refresh app tokens: %w: the refresh token was used or revoked meanwhile", ErrRefused)
		}
		return AppTokens{}, err
	}
	return r.issue(ctx, rec.User, rec.App)
}

// RevokeAppRefreshToken revokes a refresh token so that it can no longer
// be exchanged. Access tokens already issued from it stay valid until they
// expire (at most AccessTokenTTL). An unknown token fails with ErrRefused.
func (r *Reporting) RevokeAppRefreshToken(ctx context.Context, refresh string) error {
	rec, etag, key, err := r.readRefresh(ctx, refresh)
	if err != nil {
		return err
	}
	if rec.Revoked {
		return nil
	}
	rec.Revoked = true
	if err := r.writeRefresh(ctx, key, etag, rec); err != nil {
		if errors.Is(err, storage.ErrPreconditionFailed) {
			return r.RevokeAppRefreshToken(ctx, refresh)
		}
		return err
	}
	return nil
}

func (r *Reporting) readRefresh(ctx context.Context, refresh string) (refreshRecord, string, string, error) {
	var rec refreshRecord
	if !strings.HasPrefix(refresh, refreshTokenPrefix) || len(refresh) > maxTokenLen {
		return rec, "", "", fmt.Errorf("cannot use the refresh token: %w: it is not an mf_ort_ refresh token", ErrRefused)
	}
	key := refreshPrefix + refreshHash(refresh)
	obj, err := r.deps.Bucket.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return rec, "", "", fmt.Errorf("cannot use the refresh token: %w: it was never issued here", ErrRefused)
	}
	if err != nil {
		return rec, "", "", fmt.Errorf("cannot read the refresh token %q: %w", key, err)
	}
	defer obj.Close()
	body, err := io.ReadAll(io.LimitReader(obj, 64<<10))
	if err != nil {
		return rec, "", "", fmt.Errorf("cannot read the refresh token %q: %w", key, err)
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		return rec, "", "", fmt.Errorf("cannot decode the refresh token %q: %w", key, err)
	}
	return rec, obj.ETag, key, nil
}

func (r *Reporting) writeRefresh(ctx context.Context, key, etag string, rec refreshRecord) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("cannot encode the refresh token %q: %w", key, err)
	}
	if _, err := r.deps.Bucket.PutIf(ctx, key, bytes.NewReader(body), storage.IfMatch(etag)); err != nil {
		return fmt.Errorf("cannot update the refresh token %q: %w", key, err)
	}
	return nil
}

func refreshHash(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

func (r *Reporting) sealAccess(p accessPayload) string {
	body, _ := json.Marshal(p) // a struct of strings and an integer always encodes
	m := hmac.New(sha256.New, r.accessKey)
	m.Write(body)
	return accessTokenPrefix + base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// openAccess checks an access token's tag and returns its payload; expiry
// is the caller's to check.
func (r *Reporting) openAccess(token string) (accessPayload, bool) {
	var p accessPayload
	if len(token) > maxTokenLen || !strings.HasPrefix(token, accessTokenPrefix) {
		return p, false
	}
	body64, tag64, ok := strings.Cut(token[len(accessTokenPrefix):], ".")
	if !ok {
		return p, false
	}
	// Strict: one token has one spelling.
	body, err1 := decodeCanonical(body64)
	tag, err2 := decodeCanonical(tag64)
	if err1 != nil || err2 != nil {
		return p, false
	}
	m := hmac.New(sha256.New, r.accessKey)
	m.Write(body)
	if !hmac.Equal(tag, m.Sum(nil)) {
		return p, false
	}
	if json.Unmarshal(body, &p) != nil || p.User == "" {
		return p, false
	}
	return p, true
}
