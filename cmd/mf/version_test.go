package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionLine(t *testing.T) {
	for _, c := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, "mf " + mfVersion},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "mf " + mfVersion + " (go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "677d031a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"}, {Key: "vcs.time", Value: "2026-11-26T19:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}},
			"mf " + mfVersion + " (module v0.9.0; revision 677d031a0b1c of 2026-11-26T19:00:00Z, modified; go1.26.8)"},
	} {
		if got := versionLine(c.info, c.info != nil); got != c.want {
			t.Errorf("versionLine: %q, want %q", got, c.want)
		}
	}
}

func TestSecretPrefix(t *testing.T) {
	for key, want := range map[string]string{
		"mf_demosrv1_Server-Secret_1":                              "mf_demosrv1_…",
		"mf_pat_demo0001_DemoDemoDemoDemoDemoDemoDemoDemoDemoDemo": "mf_pat_demo0001_…",
		"mf_pat_":  "mf_pat_…",
		"nothing":  "not…",
		"mf_short": "mf_…",
	} {
		if got := secretPrefix(key); got != want {
			t.Errorf("secretPrefix(%q) = %q, want %q", key, got, want)
		}
	}
}
