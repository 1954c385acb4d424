/* Cortex-M7 startup for npukit firmware (Arm MPS2 AN500 as QEMU models it: -M mps2-an500).
 *
 * Reset_Handler, in order:
 *   1. SystemInit: grant full access to the FPU (CPACR CP10/CP11) before any floating-point code;
 *   2. copy .data from its load address in code memory to RAM, zero .bss (the arena included);
 *   3. open the semihosting stdio handles (newlib rdimon) and run static constructors;
 *   4. ask the host for the command line (semihosting SYS_GET_CMDLINE) and split it into argv;
 *   5. exit(main(argc, argv)): newlib flushes stdio and leaves through semihosting, which hands
 *      the status to the host (SYS_EXIT_EXTENDED), so `qemu-system-arm` exits with it.
 * rdimon's own _start is not used: it would move the stack to wherever the host's SYS_HEAPINFO
 * says (QEMU picks its largest RAM bank), away from the .stack section the linker script reserves.
 * An unexpected exception prints its name and fault status registers and exits with status 3.
 */
#include <stdint.h>
#include <stdlib.h>

#define NPK_CMDLINE_MAX 1024 /* bytes of command line, and at most NPK_ARGV_MAX words */
#define NPK_ARGV_MAX 64

#define SEMIHOST_SYS_WRITE0 0x04
#define SEMIHOST_SYS_GET_CMDLINE 0x15
#define SEMIHOST_SYS_EXIT 0x18
#define SEMIHOST_SYS_EXIT_EXTENDED 0x20
#define ADP_STOPPED_APPLICATION_EXIT 0x20026
#define ADP_STOPPED_RUN_TIME_ERROR 0x20023

#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define SCB_CFSR (*(volatile uint32_t *)0xE000ED28u)
#define SCB_HFSR (*(volatile uint32_t *)0xE000ED2Cu)
#define SCB_MMFAR (*(volatile uint32_t *)0xE000ED34u)
#define SCB_BFAR (*(volatile uint32_t *)0xE000ED38u)

/* Symbols of the linker script (mps2_an500.ld). */
extern uint32_t __data_load[], __data_start[], __data_end[];
extern uint32_t __bss_start[], __bss_end[];
extern uint32_t __stack_top[], __stack_limit[];
extern char *__heap_limit; /* newlib rdimon's _sbrk refuses to grow the heap past this */

extern void initialise_monitor_handles(void);
extern void __libc_init_array(void);
extern int main(int argc, char **argv);

void Reset_Handler(void);
void Default_Handler(void);
void SystemInit(void);

static int npk_semihost(int op, void *arg) {
  register int r0 __asm__("r0") = op;
  register void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void SystemInit(void) {
  SCB_CPACR |= 0xFu << 20; /* CP10 and CP11: full access */
  __asm__ volatile("dsb\n\tisb" ::: "memory");
}

static char npk_cmdline[NPK_CMDLINE_MAX];
static char *npk_argv[NPK_ARGV_MAX + 1];

/* The host's command line, split at spaces (QEMU joins its arg= values with single spaces). */
static int npk_get_args(void) {
  struct {
    char *buffer;
    int length;
  } block = {npk_cmdline, NPK_CMDLINE_MAX - 1};
  int argc = 0;
  if (npk_semihost(SEMIHOST_SYS_GET_CMDLINE, &block) != 0) return 0;
  npk_cmdline[NPK_CMDLINE_MAX - 1] = '\0';
  for (char *p = npk_cmdline; *p && argc < NPK_ARGV_MAX;) {
    while (*p == ' ') *p++ = '\0';
    if (!*p) break;
    npk_argv[argc++] = p;
    while (*p && *p != ' ') p++;
  }
  npk_argv[argc] = 0;
  return argc;
}

void Reset_Handler(void) {
  SystemInit();
  for (uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) *dst++ = *src++;
  for (uint32_t *dst = __bss_start; dst < __bss_end;) *dst++ = 0;
  __heap_limit = (char *)__stack_limit;
  initialise_monitor_handles();
  __libc_init_array();
  int argc = npk_get_args();
  exit(main(argc, npk_argv));
}

static void npk_put_hex(char *out, uint32_t v) {
  for (int i = 7; i >= 0; i--, v >>= 4) out[i] = "0123456789abcdef"[v & 0xFu];
}

/* Any exception without its own handler: report it and leave (status 3) rather than hang. */
void Default_Handler(void) {
  static const char *const names[16] = {"", "Reset", "NMI", "HardFault", "MemManage", "BusFault",
                                        "UsageFault", "", "", "", "", "SVCall", "DebugMonitor", "",
                                        "PendSV", "SysTick"};
  char msg[128] = "\nnpukit firmware: fault ";
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  char *p = msg;
  while (*p) p++;
  const char *name = ipsr < 16 ? names[ipsr] : "interrupt";
  while (*name) *p++ = *name++;
  const char *fields[4] = {" CFSR=0x", " HFSR=0x", " MMFAR=0x", " BFAR=0x"};
  uint32_t values[4] = {SCB_CFSR, SCB_HFSR, SCB_MMFAR, SCB_BFAR};
  for (int i = 0; i < 4; i++) {
    for (const char *f = fields[i]; *f;) *p++ = *f++;
    npk_put_hex(p, values[i]);
    p += 8;
  }
  *p++ = '\n';
  *p = '\0';
  npk_semihost(SEMIHOST_SYS_WRITE0, msg);
  uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, 3};
  npk_semihost(SEMIHOST_SYS_EXIT_EXTENDED, block);
  npk_semihost(SEMIHOST_SYS_EXIT, (void *)ADP_STOPPED_RUN_TIME_ERROR); /* hosts without the extension */
  for (;;) {
  }
}

typedef void (*npk_vector)(void);

/* The vector table: initial stack pointer, then the 15 system exceptions (0 = reserved). */
__attribute__((section(".vectors"), used)) static const npk_vector npk_vectors[16] = {
    (npk_vector)(uintptr_t)__stack_top,
    Reset_Handler,
    Default_Handler, /* NMI */
    Default_Handler, /* HardFault */
    Default_Handler, /* MemManage */
    Default_Handler, /* BusFault */
    Default_Handler, /* UsageFault */
    0,
    0,
    0,
    0,
    Default_Handler, /* SVCall */
    Default_Handler, /* DebugMonitor */
    0,
    Default_Handler, /* PendSV */
    Default_Handler, /* SysTick */
};
