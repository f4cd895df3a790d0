// Ping-pong through two unbuffered channels between two goroutines, the
// peer of swco's rendezvous ping-pong in benches/examples/skynet.rs. Run
// with GOMAXPROCS=1 to compare with two coroutines on one executor.
//
//	GOMAXPROCS=1 go run pingpong.go ROUNDS REPS
//
// Prints one line per run: "pingpong <sum> <milliseconds>", where sum is
// the sum of the values the pinger got back (ROUNDS*(ROUNDS+1)/2).
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	rounds, _ := strconv.ParseInt(os.Args[1], 10, 64)
	reps, _ := strconv.Atoi(os.Args[2])
	for r := 0; r < reps; r++ {
		ping := make(chan int64)
		pong := make(chan int64)
		go func() {
			for v := range ping {
				pong <- v + 1
			}
		}()
		start := time.Now()
		var sum int64
		for i := int64(0); i < rounds; i++ {
			ping <- i
			sum += <-pong
		}
		close(ping)
		fmt.Printf("pingpong %d %.3f\n", sum, float64(time.Since(start).Microseconds())/1000)
	}
}
