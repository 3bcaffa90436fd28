package redisurl

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, addr string
		db       int
		tls      bool
	}{
		{"127.0.0.1:6379", "127.0.0.1:6379", 0, false},
		{"redis://127.0.0.1:6380/2", "127.0.0.1:6380", 2, false},
		{"rediss://cache.internal:6379", "cache.internal:6379", 0, true},
		{"localhost", "localhost:6379", 0, false},
	} {
		ro, err := Parse("--redis", c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if ro.Addr != c.addr || ro.DB != c.db || (ro.TLSConfig != nil) != c.tls {
			t.Errorf("Parse(%q) = addr %q db %d tls %v, want %q %d %v", c.in, ro.Addr, ro.DB, ro.TLSConfig != nil, c.addr, c.db, c.tls)
		}
	}
}

func TestParseExplains(t *testing.T) {
	for _, in := range []string{"not a url", "http://127.0.0.1:6379", "redis://127.0.0.1:6379/notadb", ""} {
		_, err := Parse("--redis", in)
		if err == nil {
			t.Fatalf("Parse(%q) accepted", in)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, `--redis "`+in+`": `) || !strings.Contains(msg, "want host:port or redis://") {
			t.Errorf("Parse(%q) = %q: want the flag, the value and the accepted forms", in, msg)
		}
	}
}
