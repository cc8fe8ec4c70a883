//go:build !linux

package main

import (
	"errors"
	"os"
)

func isTerminal(*os.File) bool { return false }

func termSize(*os.File) (uint16, uint16, error) { return 0, 0, errors.ErrUnsupported }

func makeRaw(*os.File) (func(), error) { return nil, errors.ErrUnsupported }
