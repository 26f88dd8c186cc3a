handle SIGSEGV nostop noprint pass
info threads
thread apply all bt 3
detach
