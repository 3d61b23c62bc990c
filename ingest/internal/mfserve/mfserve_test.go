package mfserve

import (
	"os"
	"testing"
)

// TestParseVmRSS reads the resident memory from a /proc status text
// (testdata/status, a real one) and from this process's own.
func TestParseVmRSS(t *testing.T) {
	raw, err := os.ReadFile("testdata/status")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ParseVmRSS(raw); err != nil || n != 123456*1024 {
		t.Errorf("testdata/status: %d %v, want %d", n, err, 123456*1024)
	}
	if _, err := ParseVmRSS([]byte("Name:\tkthreadd\nState:\tS (sleeping)\n")); err == nil {
		t.Error("a status without VmRSS was read")
	}
	if n, err := ReadRSS(os.Getpid()); err != nil || n <= 0 {
		t.Errorf("this process: %d %v", n, err)
	}
}

// TestValidate: the start refuses a config without a binary or a data
// directory.
func TestValidate(t *testing.T) {
	c := DefaultConfig()
	if c.Validate() == nil {
		t.Error("a config without a data directory passed")
	}
	c.Data = t.TempDir()
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	c.Binary = ""
	if c.Validate() == nil {
		t.Error("a config without a binary passed")
	}
}
