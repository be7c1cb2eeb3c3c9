package wasmop

import (
	"fmt"
	"os"

	"github.com/wasmop/wasmop/sdk-go/internal/host"
)

// Level is a log level.
type Level int

const (
	// LevelTrace is the most verbose.
	LevelTrace Level = iota
	// LevelDebug is for debugging.
	LevelDebug
	// LevelInfo is for what an operator wants to see.
	LevelInfo
	// LevelWarn is for what needs attention.
	LevelWarn
	// LevelError is for failures.
	LevelError
)

var levelNames = [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}

// Log writes message to the host's log, under the plugin's name. Natively (tests) it goes to
// stderr.
func Log(level Level, message string) {
	if level < LevelTrace || level > LevelError {
		level = LevelError
	}
	if log := host.Installed.Log; log != nil {
		log(int(level), message)
		return
	}
	fmt.Fprintf(os.Stderr, "%s %s\n", levelNames[level], message)
}

// Debugf logs at debug level.
func Debugf(format string, args ...any) { Log(LevelDebug, fmt.Sprintf(format, args...)) }

// Infof logs at info level.
func Infof(format string, args ...any) { Log(LevelInfo, fmt.Sprintf(format, args...)) }

// Warnf logs at warn level.
func Warnf(format string, args ...any) { Log(LevelWarn, fmt.Sprintf(format, args...)) }
