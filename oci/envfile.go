package oci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxEnvFileSize bounds an env file (fileKeyRef), which a container wrote:
// the kubelet reads any length, line by line; staticpodd refuses a file past
// 1 MiB rather than read a volume's worth of comments on every start. A
// process's whole environment is bounded by ARG_MAX (2 MiB) anyway.
const maxEnvFileSize = 1 << 20

// errEnvFileTooLarge is the read of an env file past maxEnvFileSize.
var errEnvFileTooLarge = fmt.Errorf("larger than %d bytes", maxEnvFileSize)

// parseEnvFile finds key in r as the kubelet's envutil.ParseEnv does: lines
// of KEY='value' (the value in single quotes, taken literally, newlines
// included), blank lines and # comments skipped, a comment after the closing
// quote allowed; whitespace before '=' is an error, whitespace after it an
// empty value. It returns "" when key is not there. Each line is bounded as
// the kubelet's (bufio.Scanner's 64 KiB), the whole by maxEnvFileSize.
func parseEnvFile(r io.Reader, key string) (string, error) {
	lr := &io.LimitedReader{R: r, N: maxEnvFileSize + 1}
	scanner := bufio.NewScanner(lr)
	value, err := scanEnv(scanner, key)
	if lr.N <= 0 {
		return "", errEnvFileTooLarge
	}
	return value, err
}

func scanEnv(scanner *bufio.Scanner, key string) (string, error) {
	lineNum := 0
	for scanner.Scan() {
		lineNum++
		line := strings.TrimLeft(scanner.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, valuePart, ok := strings.Cut(line, "=")
		if !ok {
			return "", fmt.Errorf("line %d: missing '='", lineNum)
		}
		if trimmed := strings.TrimRight(name, " \t"); trimmed == "" {
			return "", fmt.Errorf("line %d: empty variable name", lineNum)
		} else if trimmed != name {
			return "", fmt.Errorf("line %d: whitespace before '=' is not allowed", lineNum)
		}
		if strings.TrimLeft(valuePart, " \t") != valuePart {
			// KEY= 'v' assigns the empty string, as in a shell.
			if name == key {
				return "", nil
			}
			continue
		}
		rest, ok := strings.CutPrefix(valuePart, "'")
		if !ok {
			return "", fmt.Errorf("line %d: value must be enclosed in single quotes", lineNum)
		}
		var value strings.Builder
		start := lineNum
		for {
			if before, after, closed := strings.Cut(rest, "'"); closed {
				value.WriteString(before)
				after = strings.TrimLeft(after, " \t")
				if after != "" && !strings.HasPrefix(after, "#") {
					return "", fmt.Errorf("line %d: unexpected content after closing quote", lineNum)
				}
				break
			}
			value.WriteString(rest)
			value.WriteString("\n")
			if !scanner.Scan() {
				if err := scanner.Err(); err != nil {
					return "", err
				}
				return "", fmt.Errorf("line %d: unclosed single quote", start)
			}
			lineNum++
			rest = scanner.Text()
		}
		if name == key {
			return value.String(), nil
		}
	}
	if err := scanner.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return "", fmt.Errorf("line %d: %w", lineNum+1, err)
		}
		return "", err
	}
	return "", nil
}
