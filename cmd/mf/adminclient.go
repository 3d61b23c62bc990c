package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// adminClient is the admin API (/admin/v1) of a running mf as the
// commands that work remotely call it (mf import, mf replay, mf
// provision): its base URL and the bearer token sent with every request.
type adminClient struct {
	base  string // without a trailing "/"
	token string // "" sends no Authorization header
}

func newAdminClient(base, token string) adminClient {
	return adminClient{base: strings.TrimRight(base, "/"), token: token}
}

// adminAnswer is an answer of the admin API, its body read whole.
type adminAnswer struct {
	Code   int
	Status string // "200 OK"
	Body   []byte
}

// request builds a request for path (from "/admin/v1/…", with its query)
// with the token. An error means the base URL is unusable.
func (a adminClient) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return nil, err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	return req, nil
}

// send sends req and reads the answer. An error means the admin API was
// not reached or its answer was cut.
func (a adminClient) send(req *http.Request) (adminAnswer, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return adminAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return adminAnswer{Code: resp.StatusCode, Status: resp.Status, Body: body}, err
}

// call sends one request without a body, with a minute to answer.
func (a adminClient) call(ctx context.Context, method, path string) (adminAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := a.request(ctx, method, path, nil)
	if err != nil {
		return adminAnswer{}, err
	}
	return a.send(req)
}

// adminError is the message of an admin API error body: its "error"
// member, else the body itself.
func adminError(body []byte) string {
	var e struct{ Error string }
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return strings.TrimSpace(string(body))
	}
	return e.Error
}
