// Package mm2import converts a MirrorMaker 2 (dedicated mode) properties
// file, or a Strimzi KafkaMirrorMaker2 resource (with the Helm chart's
// values), into a kmirror configuration: the clusters and their security,
// one mirror per enabled flow, and an mm2 block on every mirror so that
// kmirror continues where MM2 stopped. It only computes: reading files and printing
// are the caller's (cmd/kmirror import-mm2).
package mm2import

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Property is one key of a properties file, with the line its logical
// line starts on.
type Property struct {
	Key, Value string
	Line       int
}

// SyntaxError is a line java.util.Properties refuses.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ParseProperties reads data as java.util.Properties.load(InputStream)
// does, which is how MirrorMaker 2 reads its file (Utils.loadProps): bytes
// are ISO-8859-1; a logical line continues on the next natural line after
// an odd number of trailing backslashes (the next line's leading blanks
// dropped); lines whose first non-blank character is '#' or '!' are
// comments (a comment never continues, and a continued line is never a
// comment); the key ends at the first unescaped '=', ':' or blank, and one
// '=' or ':' with the blanks around it separates it from the value; in
// keys and values \t \n \r \f and \uXXXX are escapes and a backslash
// before any other character stands for that character. A key given twice
// keeps its last value, at its last line. The result is in file order.
func ParseProperties(data []byte) ([]Property, error) {
	lr := lineReader{data: data, line: 1}
	var props []Property
	index := map[string]int{}
	for {
		line, start, ok := lr.next()
		if !ok {
			break
		}
		key, value, err := splitLine(line)
		if err != nil {
			return nil, &SyntaxError{Line: start, Msg: err.Error()}
		}
		if i, dup := index[key]; dup {
			props = append(props[:i], props[i+1:]...)
			for k, j := range index {
				if j > i {
					index[k] = j - 1
				}
			}
		}
		index[key] = len(props)
		props = append(props, Property{Key: key, Value: value, Line: start})
	}
	return props, nil
}

// lineReader returns logical lines, as Properties.LineReader does.
type lineReader struct {
	data []byte
	pos  int
	line int // the natural line pos is on
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// next returns the next logical line (escapes and continuation backslashes
// still in it, minus the one that continued it) and the line it starts on.
func (r *lineReader) next() (string, int, bool) {
	var b []byte
	skipBlank, comment, newLine, appended, backslash := true, false, true, false, false
	start := r.line
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		r.pos++
		if skipBlank {
			if isBlank(c) {
				continue
			}
			if !appended && (c == '\r' || c == '\n') {
				r.endLine(c)
				start = r.line
				continue
			}
			skipBlank, appended = false, false
		}
		if newLine {
			newLine = false
			if c == '#' || c == '!' {
				comment = true
				continue
			}
		}
		if c != '\n' && c != '\r' {
			b = append(b, c)
			if c == '\\' {
				backslash = !backslash
			} else {
				backslash = false
			}
			continue
		}
		r.endLine(c)
		if comment || len(b) == 0 {
			b, comment, newLine, skipBlank = b[:0], false, true, true
			start = r.line
			continue
		}
		if !backslash {
			return latin1(b), start, true
		}
		b = b[:len(b)-1]
		skipBlank, appended, backslash = true, true, false
	}
	if len(b) == 0 || comment {
		return "", 0, false
	}
	if backslash {
		b = b[:len(b)-1]
	}
	return latin1(b), start, true
}

// endLine counts the natural line that c (a '\r' or '\n') ends; a "\r\n"
// counts once.
func (r *lineReader) endLine(c byte) {
	r.line++
	if c == '\r' && r.pos < len(r.data) && r.data[r.pos] == '\n' {
		r.pos++
	}
}

// latin1 decodes ISO-8859-1: every byte is the code point of its value.
func latin1(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = rune(c)
	}
	return string(rs)
}

// splitLine splits a logical line into its unescaped key and value.
func splitLine(line string) (string, string, error) {
	keyLen, valueStart, hasSep, backslash := 0, len(line), false, false
	for keyLen < len(line) {
		c := line[keyLen]
		if (c == '=' || c == ':') && !backslash {
			valueStart, hasSep = keyLen+1, true
			break
		}
		if isBlank(c) && !backslash {
			valueStart = keyLen + 1
			break
		}
		backslash = c == '\\' && !backslash
		keyLen++
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isBlank(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	key, err := unescape(line[:keyLen])
	if err != nil {
		return "", "", err
	}
	value, err := unescape(line[valueStart:])
	if err != nil {
		return "", "", err
	}
	return key, value, nil
}

// unescape resolves the escapes of Properties.loadConvert. s holds
// ISO-8859-1 code points, one byte each below 0x80; escapes are ASCII.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		if c != '\\' || i+1 == len(rs) {
			b.WriteRune(c)
			continue
		}
		i++
		switch c = rs[i]; c {
		case 'u':
			if i+4 >= len(rs) {
				return "", fmt.Errorf(`malformed \uxxxx escape %q (want four hex digits)`, string(rs[i-1:]))
			}
			n, err := strconv.ParseUint(string(rs[i+1:i+5]), 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \uxxxx escape %q (want four hex digits)`, string(rs[i-1:i+5]))
			}
			i += 4
			r := rune(n)
			// Java strings are UTF-16: two escapes may make one code point.
			if utf16.IsSurrogate(r) && i+6 < len(rs) && rs[i+1] == '\\' && rs[i+2] == 'u' {
				if lo, err := strconv.ParseUint(string(rs[i+3:i+7]), 16, 16); err == nil {
					if pair := utf16.DecodeRune(r, rune(lo)); pair != utf8.RuneError {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r)
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), nil
}
