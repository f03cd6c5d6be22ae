package mm2import

import (
	"errors"
	"reflect"
	"testing"
)

// The expected values are what java.util.Properties.load(InputStream)
// gives for the same bytes (checked with OpenJDK 17).
func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Property
	}{
		{"separators", "a=1\nb: 2\nc 3\nd\t=\t4\ne  :  5\n", []Property{
			{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}, {"d", "4", 4}, {"e", "5", 5}}},
		{"only one separator is eaten", "a==1\nb :=2\nc = = 3\n", []Property{
			{"a", "=1", 1}, {"b", "=2", 2}, {"c", "= 3", 3}}},
		{"key without value", "alone\nempty=\n", []Property{{"alone", "", 1}, {"empty", "", 2}}},
		{"comments and blank lines", "# c\n! c\n   # indented\n\n  \t\na=1 # not a comment\n", []Property{
			{"a", "1 # not a comment", 6}}},
		{"trailing blanks kept, leading dropped", "   a = x  \n", []Property{{"a", "x  ", 1}}},
		{"continuation", "a = one, \\\n    two, \\\n\tthree\nb=2\n", []Property{
			{"a", "one, two, three", 1}, {"b", "2", 4}}},
		{"escaped backslash does not continue", "a = x\\\\\nb = y\n", []Property{{"a", `x\`, 1}, {"b", "y", 2}}},
		{"continued line is never a comment", "a = x\\\n# y\n", []Property{{"a", "x# y", 1}}},
		{"comment never continues", "# c \\\na = 1\n", []Property{{"a", "1", 2}}},
		{"blank line ends a continuation", "a = x\\\n\nb = 1\n", []Property{{"a", "x", 1}, {"b", "1", 3}}},
		{"backslash at end of file", "a = x\\", []Property{{"a", "x", 1}}},
		{"escapes", `a\ b\=c\:d = t\tn\nr\rf\f\q\\` + "\n", []Property{{"a b=c:d", "t\tn\nr\rf\fq\\", 1}}},
		{"unicode", `k = caf\u00e9 \u20AC \uD83D\uDE00` + "\n", []Property{{"k", "café € 😀", 1}}},
		{"latin-1 bytes", "k = caf\xe9\n", []Property{{"k", "café", 1}}},
		{"CR and CRLF line ends", "a=1\rb=2\r\nc=\\\r\n  3\r\nd=4", []Property{
			{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}, {"d", "4", 5}}},
		{"last value wins", "a=1\nb=2\na=3\n", []Property{{"b", "2", 2}, {"a", "3", 3}}},
		{"form feed is a blank", "\fa\f=\fb\n", []Property{{"a", "b", 1}}},
		{"key continued", "a\\\n  b = c\n", []Property{{"ab", "c", 1}}},
		{"continued blank start", "  \\\n  k = v\n", []Property{{"k", "v", 1}}},
		{"odd backslashes continue", "k = v \\\\\\\n  w\n", []Property{{"k", `v \w`, 1}}},
		{"empty keys", "=v\n:\n", []Property{{"", "", 2}}},
		{"escaped blank key", "\\ = x\n", []Property{{" ", "x", 1}}},
		{"continued twice", "k =\\\n\\\n  x\n", []Property{{"k", "x", 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProperties([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParsePropertiesMalformedUnicode(t *testing.T) {
	for _, in := range []string{"a=1\nk = \\u12\n", "a=1\nk = \\uZZZZ\n", "a=1\nk\\u00 = v\n"} {
		_, err := ParseProperties([]byte(in))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Line != 2 {
			t.Errorf("%q: got %v, want a syntax error on line 2", in, err)
		}
	}
}
