package testenv

import (
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/wallclock"
)

func TestParseOffset(t *testing.T) {
	day := 24 * time.Hour
	for v, want := range map[string]time.Duration{
		"+400d": 400 * day, "400d": 400 * day, "-30d": -30 * day, "0d": 0,
		"9600h": 9600 * time.Hour, "-1h30m": -90 * time.Minute, "+36500d": 36500 * day,
	} {
		if got, err := parseOffset(v); err != nil || got != want {
			t.Errorf("parseOffset(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"d", "+d", "1.5d", "400", "400days", "1y", "+36501d", "-999999999999d", "900000h", " 400d", "4e2d"} {
		if got, err := parseOffset(v); err == nil {
			t.Errorf("parseOffset(%q) = %v, want an error", v, got)
		}
	}
}

// moveClock moves wallclock.Now by the offset and nothing else; a bad
// value is an error, not an unshifted run.
func TestMoveClock(t *testing.T) {
	saved := wallclock.Now
	t.Cleanup(func() { wallclock.Now = saved })

	t.Setenv(ClockOffsetEnv, "+400d")
	if err := moveClock(); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(wallclock.Now()) - 400*24*time.Hour; d < -time.Second || d > time.Second {
		t.Errorf("wall clock off the offset by %v", d)
	}

	wallclock.Now = saved
	t.Setenv(ClockOffsetEnv, "next year")
	if err := moveClock(); err == nil {
		t.Error("a malformed offset was accepted")
	}
	t.Setenv(ClockOffsetEnv, "")
	if err := moveClock(); err != nil || time.Until(wallclock.Now()).Abs() > time.Second {
		t.Errorf("no offset: %v, clock moved by %v", err, time.Until(wallclock.Now()))
	}
}
