package config

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

const secretMask = "<secret>"

// Secret is a string that is never printed: String, every fmt verb,
// MarshalYAML, MarshalJSON, MarshalText and LogValue all give "<secret>".
// Use Reveal to get the value.
type Secret string

var _ slog.LogValuer = Secret("")

// Reveal returns the secret value. Call it only where the value is handed to
// the thing that needs it (a SASL mechanism, say), never for display.
func (s Secret) Reveal() string { return string(s) }

// String returns "<secret>".
func (s Secret) String() string { return secretMask }

// Format writes "<secret>" for every verb, so that not even %#v, %d or %x
// leaks the value.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, secretMask) }

// LogValue returns "<secret>" for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(secretMask) }

// MarshalYAML returns "<secret>".
func (s Secret) MarshalYAML() (any, error) { return secretMask, nil }

// MarshalJSON returns "<secret>" as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(secretMask)), nil }

// MarshalText returns "<secret>".
func (s Secret) MarshalText() ([]byte, error) { return []byte(secretMask), nil }

// Duration is a time.Duration written as a Go duration string ("10s",
// "500ms", "1m30s") in the file, and marshalled back the same way.
type Duration time.Duration

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText formats d like time.Duration (YAML and JSON use it).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := parseDuration(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want a number with a unit, such as \"10s\" or \"500ms\")", s)
	}
	return Duration(v), nil
}

// ByteSize is a number of bytes, written as an integer or with a unit:
// KiB, MiB, GiB (powers of 1024), KB, MB, GB (powers of 1000) or B.
type ByteSize int64

// byteUnits, longest suffix first.
var byteUnits = []struct {
	suffix string
	n      int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}

// String formats b with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalText formats b like String.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

func parseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	num := s
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q (want a number of bytes, or one with a unit such as \"256MiB\" or \"1GiB\")", s)
	}
	return ByteSize(n * mult), nil
}

// Error is one configuration problem. Load returns one or more of them
// (several joined with errors.Join, sorted by line).
type Error struct {
	// File is the file name given to Load (the path given to LoadFile).
	File string
	// Line is the 1-based line of the offending value, or of its nearest
	// enclosing key when the value is absent; 0 when unknown.
	Line int
	// Field is the path of the offending key, written with YAML key names
	// and [index] for list items: "mirrors[0].topics.include[2]". Empty for
	// problems with the file as a whole.
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error formats e as "<file>:<line>: <field>: <msg>", leaving out the line
// and the field when they are unknown or empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}
