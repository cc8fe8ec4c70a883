package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// readAll reads the monitor's report up to EOF (the monitor closes the pipe
// after one report, or dies).
func readAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	return data, nil
}

func decodeReport(data []byte, v any) error {
	if len(data) == 0 {
		return errors.New("exited without a report (see its monitor.log)")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode report: %w", err)
	}
	return nil
}
