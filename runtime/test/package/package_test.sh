#!/bin/sh
# package_test.sh — installs tmk into a scratch prefix and builds programs
# against it out of tree, the ways a user would.
#
#   package_test.sh install   BUILD_DIR PREFIX LIBDIR [CONFIG]
#   package_test.sh cmake     PREFIX SOURCE_DIR WORK_DIR GENERATOR C_COMPILER
#   package_test.sh pkgconfig PREFIX SOURCE_DIR WORK_DIR LIBDIR C_COMPILER
#   package_test.sh tmkcc     PREFIX SOURCE_DIR WORK_DIR LIBDIR
#   package_test.sh kr        PREFIX SOURCE_DIR WORK_DIR
#
# install runs `cmake --install` and checks what landed; the others build
# example.c (kr: kr_example.c) and run it on 2 processes, passing when it
# exits 0 and process 0 reports "passed".  Every program must find libtmk
# without LD_LIBRARY_PATH.  CMAKE names the cmake to use (default: cmake).
set -eu
unset LD_LIBRARY_PATH
cmake=${CMAKE:-cmake}

fail() {
  echo "package_test: $*" >&2
  exit 1
}

# run_example PROGRAM NAME: runs PROGRAM -- -n 2 and checks its report.
run_example() {
  echo "+ $1 -- -n 2"
  output=$("$1" -- -n 2) || fail "$1 exited with status $?: $output"
  printf '%s\n' "$output"
  printf '%s\n' "$output" | grep -q "^$2: 2 processes, .*: passed$" ||
    fail "$1 did not report '$2: 2 processes, ...: passed'"
}

# fresh DIR: an empty directory.
fresh() {
  rm -rf "$1"
  mkdir -p "$1"
}

mode=$1
shift
case $mode in
  install)
    build=$1 prefix=$2 libdir=$3 config=${4:-}
    rm -rf "$prefix"
    if [ -n "$config" ]; then
      "$cmake" --install "$build" --prefix "$prefix" --config "$config"
    else
      "$cmake" --install "$build" --prefix "$prefix"
    fi
    for file in "$libdir/libtmk.so" "$libdir/libtmk.a" include/Tmk.h include/tmk.h \
                "$libdir/cmake/tmk/tmkConfig.cmake" "$libdir/cmake/tmk/tmkConfigVersion.cmake" \
                "$libdir/cmake/tmk/tmkTargets.cmake" "$libdir/cmake/tmk/tmkStaticTargets.cmake" \
                "$libdir/pkgconfig/tmk.pc" bin/tmkcc bin/tmk_info; do
      [ -e "$prefix/$file" ] || fail "$prefix/$file was not installed"
    done
    [ -x "$prefix/bin/tmkcc" ] || fail "tmkcc is not executable"
    # The static archive stands alone: the substrate is inside it.
    nm -C "$prefix/$libdir/libtmk.a" | grep -q " T tmk::ucx_transport::create" ||
      fail "libtmk.a lacks the substrate (tmk::ucx_transport::create)"
    nm -C "$prefix/$libdir/libtmk.a" | grep -q " T Tmk_startup" || fail "libtmk.a lacks Tmk_startup"
    # The shared library exports Tmk.h's names and nothing of its own
    # insides, which a program could otherwise bind to (or interpose).
    exported=$(nm -D --defined-only "$prefix/$libdir/libtmk.so" | awk '{print $3}')
    printf '%s\n' "$exported" | grep -qx "Tmk_startup" || fail "libtmk.so does not export Tmk_startup"
    others=$(printf '%s\n' "$exported" | grep -v '^Tmk_' || true)
    [ -z "$others" ] || fail "libtmk.so exports names beyond Tmk.h's: $(echo $others | cut -c1-200)"
    grep -qx "prefix=$prefix" "$prefix/$libdir/pkgconfig/tmk.pc" ||
      fail "tmk.pc does not name the prefix $prefix"
    info=$("$prefix/bin/tmk_info" -n 4) || fail "tmk_info -n 4 failed: $info"
    for expected in "^tmk [0-9]" "TMK_NPROCS " "TMK_PAGE_SIZE " "UCX transports on this host" \
                    "^ *4  none  " "tag path at n = 4: "; do
      printf '%s\n' "$info" | grep -q "$expected" || fail "tmk_info -n 4 printed no '$expected'"
    done
    echo "installed into $prefix"
    ;;

  cmake)
    prefix=$1 source=$2 work=$3 generator=$4 compiler=$5
    fresh "$work"
    "$cmake" -S "$source/cmake_project" -B "$work" -G "$generator" \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$compiler" -DCMAKE_BUILD_TYPE=Release
    found=$(sed -n 's/^tmk_DIR:PATH=//p' "$work/CMakeCache.txt")
    case $found in
      "$prefix"/*) ;;
      *) fail "find_package(tmk) found '$found', not the copy in $prefix" ;;
    esac
    "$cmake" --build "$work"
    run_example "$work/example" example
    run_example "$work/example_static" example
    ;;

  pkgconfig)
    prefix=$1 source=$2 work=$3 libdir=$4 compiler=$5
    fresh "$work"
    PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
    export PKG_CONFIG_PATH
    [ "$(pkg-config --variable=prefix tmk)" = "$prefix" ] ||
      fail "pkg-config found a tmk.pc outside $prefix"
    echo "+ pkg-config --cflags --libs tmk: $(pkg-config --cflags --libs tmk)"
    echo "+ pkg-config --static --libs tmk: $(pkg-config --static --libs tmk)"
    make -C "$work" -f "$source/Makefile" VPATH="$source" CC="$compiler"
    run_example "$work/example" example
    run_example "$work/example_static" example
    ;;

  tmkcc)
    prefix=$1 source=$2 work=$3 libdir=$4
    fresh "$work"
    tmkcc=$prefix/bin/tmkcc
    unset TMK_CC
    cd "$work"
    echo "+ tmkcc --showme -O2 -o example example.c: $("$tmkcc" --showme -O2 -o example "$source/example.c")"
    command=$("$tmkcc" --showme -O2 -o example "$source/example.c")
    case $command in
      "cc -I$prefix/include -O2 -o example $source/example.c -L$prefix/$libdir -Wl,-rpath,$prefix/$libdir -ltmk") ;;
      *) fail "unexpected tmkcc --showme: $command" ;;
    esac
    case $("$tmkcc" --showme -c x.c) in
      *-ltmk*) fail "tmkcc --showme -c links" ;;
    esac
    [ "$("$tmkcc" --showme:compile)" = "-I$prefix/include" ] || fail "tmkcc --showme:compile"
    case $(TMK_CC="gcc -g" "$tmkcc" --showme x.c) in
      "gcc -g -I$prefix/include x.c "*) ;;
      *) fail "TMK_CC is not honoured: $(TMK_CC="gcc -g" "$tmkcc" --showme x.c)" ;;
    esac
    # One line: compile and link.
    "$tmkcc" -O2 -o example "$source/example.c"
    run_example ./example example
    # Separately, and through a symbolic link to tmkcc, as from a PATH
    # directory elsewhere.
    ln -s "$tmkcc" ./tmkcc-link
    ./tmkcc-link -O2 -Wall -c "$source/example.c" -o example.o
    ./tmkcc-link -o example_linked example.o
    run_example ./example_linked example
    ;;

  kr)
    prefix=$1 source=$2 work=$3
    fresh "$work"
    cd "$work"
    case $("$prefix/bin/tmkcc" --showme -o kr_example kr_example.c) in
      *-std=*) fail "tmkcc adds a -std" ;;
    esac
    "$prefix/bin/tmkcc" -o kr_example "$source/kr_example.c"
    run_example ./kr_example kr_example
    ;;

  *)
    fail "unknown mode '$mode'"
    ;;
esac
