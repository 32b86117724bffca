/*
 * ThreadSanitizer annotations. Some accesses to window memory are ordered
 * against the kernels' by events TSan cannot see: the network (a peer's
 * signal comes after its data; our completion after the engine read our
 * source) and other processes (a peer's put lands only after this rank
 * entered the call, which the peer learnt over the network). In a TSan
 * build the code that makes such accesses on a peer's behalf runs between
 * CCO_TSAN_PEER_ACCESS_BEGIN and _END: its memory accesses are not checked,
 * its locks still are. Elsewhere both are no-ops.
 */
#ifndef CCO_BASE_TSAN_H_
#define CCO_BASE_TSAN_H_

#if defined(__SANITIZE_THREAD__)
#define CCO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CCO_TSAN 1
#endif
#endif

#ifdef CCO_TSAN
/* Dynamic annotations, defined by the TSan runtime. */
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
#define CCO_TSAN_PEER_ACCESS_BEGIN() \
  (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define CCO_TSAN_PEER_ACCESS_END() \
  (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define CCO_TSAN_PEER_ACCESS_BEGIN() ((void)0)
#define CCO_TSAN_PEER_ACCESS_END() ((void)0)
#endif

#endif /* CCO_BASE_TSAN_H_ */
