/* The sandbox ("pause") container of the real test node: sleeps until SIGTERM/SIGINT, reaps children
   (it is PID 1 of the pod's namespaces). No registry is reachable here, so it is built locally. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  signal(SIGINT, quit);
  signal(SIGTERM, quit);
  signal(SIGCHLD, reap);
  for (;;) pause();
  return 1;
}
