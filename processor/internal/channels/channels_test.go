package channels

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

type classifyCase struct {
	Name      string `json:"name"`
	PageHost  string `json:"pageHost"`
	PageQuery string `json:"pageQuery"`
	RefHost   string `json:"refHost"`
	RefPath   string `json:"refPath"`
	Want      struct {
		Channel    string `json:"channel"`
		Source     string `json:"source"`
		Medium     string `json:"medium"`
		Campaign   string `json:"campaign"`
		Term       string `json:"term"`
		AdPlatform string `json:"adPlatform"`
		ClickID    string `json:"clickId"`
		RefName    string `json:"refName"`
	} `json:"want"`
}

// TestClassify runs the cases of testdata/classify.jsonl.
func TestClassify(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/classify.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var tc classifyCase
		if err := json.Unmarshal(sc.Bytes(), &tc); err != nil {
			t.Fatalf("case %d: %v", n+1, err)
		}
		n++
		t.Run(tc.Name, func(t *testing.T) {
			// Twice: the second answer comes from the referrer cache.
			for range 2 {
				got := c.Classify(Input{PageHost: tc.PageHost, PageQuery: tc.PageQuery, RefHost: tc.RefHost, RefPath: tc.RefPath})
				w := tc.Want
				if got.Channel != w.Channel || got.Source != w.Source || got.Medium != w.Medium ||
					got.Campaign != w.Campaign || got.Term != w.Term || got.AdPlatform != w.AdPlatform ||
					got.ClickID != w.ClickID || got.RefName != w.RefName {
					t.Fatalf("got %+v, want %+v", got, w)
				}
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 30 {
		t.Fatalf("only %d cases read", n)
	}
}

// TestMatchSpecificity checks the most specific pattern wins.
func TestMatchSpecificity(t *testing.T) {
	l, err := ParseLists("search\tgoogle.{}\tGoogle\nsocial\tplus.google.com\tGoogle+\nai\tx.com/i/grok\tGrok\nsocial\tx.com\tTwitter\nsearch\t{}.ask.com\tAsk\nsearch\timages.{}.ask.com\tAsk Images\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host, path, want string
	}{
		{"google.fr", "/", "Google"},
		{"www.google.com.au", "/", "Google"},
		{"plus.google.com", "/", "Google+"},
		{"a.plus.google.com", "/", "Google+"},
		{"x.com", "/i/grok/chat", "Grok"},
		{"x.com", "/i/grokker", "Twitter"},
		{"de.ask.com", "/", "Ask"},
		{"images.de.ask.com", "/", "Ask Images"},
		{"google", "/", ""},
		{"notgoogle.com", "/", ""},
	} {
		s, _ := l.Match(c.host, c.path)
		if s.Name != c.want {
			t.Errorf("Match(%q, %q) = %q, want %q", c.host, c.path, s.Name, c.want)
		}
	}
}

func BenchmarkClassify(b *testing.B) {
	c, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	in := Input{PageHost: "shop.example", PageQuery: "utm_source=newsletter&utm_medium=email", RefHost: "www.google.co.uk", RefPath: "/"}
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Classify(in)
	}
}
