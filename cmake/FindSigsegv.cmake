# FindSigsegv: GNU libsigsegv, which ships no pkg-config file.
# Defines Sigsegv_FOUND and the imported target Sigsegv::sigsegv.
find_path(Sigsegv_INCLUDE_DIR sigsegv.h)
find_library(Sigsegv_LIBRARY sigsegv)

if(Sigsegv_INCLUDE_DIR)
  file(STRINGS "${Sigsegv_INCLUDE_DIR}/sigsegv.h" _sigsegv_version
       REGEX "#define LIBSIGSEGV_VERSION 0x[0-9a-fA-F]+")
  string(REGEX MATCH "0x[0-9a-fA-F]+" _sigsegv_version "${_sigsegv_version}")
  if(_sigsegv_version)
    math(EXPR _major "${_sigsegv_version} >> 8" OUTPUT_FORMAT DECIMAL)
    math(EXPR _minor "${_sigsegv_version} & 255" OUTPUT_FORMAT DECIMAL)
    set(Sigsegv_VERSION "${_major}.${_minor}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Sigsegv
  REQUIRED_VARS Sigsegv_LIBRARY Sigsegv_INCLUDE_DIR
  VERSION_VAR Sigsegv_VERSION)

if(Sigsegv_FOUND AND NOT TARGET Sigsegv::sigsegv)
  add_library(Sigsegv::sigsegv UNKNOWN IMPORTED)
  set_target_properties(Sigsegv::sigsegv PROPERTIES
    IMPORTED_LOCATION "${Sigsegv_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Sigsegv_INCLUDE_DIR}")
endif()
mark_as_advanced(Sigsegv_INCLUDE_DIR Sigsegv_LIBRARY)
