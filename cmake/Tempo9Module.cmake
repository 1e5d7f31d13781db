# tempo9_module(NAME DEPS dep...) — one static library per src/ folder.
# Files named *_avx2.cpp / *_avx512.cpp / *_amx.cpp get the matching ISA flags, so the rest of the
# build stays portable and the CPU backend picks the kernel at run time.
add_library(tempo9_all INTERFACE)

function(tempo9_module name)
  cmake_parse_arguments(M "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  if(srcs)
    add_library(tempo9_${name} STATIC ${srcs})
    target_include_directories(tempo9_${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(tempo9_${name} PUBLIC ${M_DEPS})
    foreach(src IN LISTS srcs)
      if(src MATCHES "_avx2\\.cpp$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
      elseif(src MATCHES "_avx512\\.cpp$")
        set_source_files_properties(${src} PROPERTIES
          COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16")
      elseif(src MATCHES "_amx\\.cpp$")
        set_source_files_properties(${src} PROPERTIES
          COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mamx-tile;-mamx-int8")
      endif()
    endforeach()
  else()
    add_library(tempo9_${name} INTERFACE)
    target_include_directories(tempo9_${name} INTERFACE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(tempo9_${name} INTERFACE ${M_DEPS})
  endif()
  target_link_libraries(tempo9_all INTERFACE tempo9_${name})
endfunction()
