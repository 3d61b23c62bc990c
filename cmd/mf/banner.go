package main

import "strings"

// shownSecret is how the start-up banner shows a secret key or API key:
// in full only with --print-secrets (the local demo of `go tool task
// run`); otherwise its public prefix, up to and with the key id
// ("mf_demosrv1_…", "mf_pat_demo0001_…"), so that the banner, which ends
// up in journald or container logs, never holds a secret.
func (s *service) shownSecret(key string) string {
	if s.cfg.PrintSecrets == "true" {
		return key
	}
	return secretPrefix(key)
}

// secretPrefix keeps a key's public part: "mf_", "pat_" for API keys, and
// the key id that follows, then "…". A key of another form keeps its first
// three characters.
func secretPrefix(key string) string {
	rest, ok := strings.CutPrefix(key, "mf_")
	if !ok {
		return key[:min(3, len(key))] + "…"
	}
	prefix := "mf_"
	if r, ok := strings.CutPrefix(rest, "pat_"); ok {
		prefix, rest = prefix+"pat_", r
	}
	id, _, found := strings.Cut(rest, "_")
	if !found || len(id) == 0 || len(id) > 16 {
		return prefix + "…"
	}
	return prefix + id + "_…"
}
